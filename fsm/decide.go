package fsm

// Decision is the outcome of Decide: the event to fire ("" for none) and why.
type Decision struct {
	Event  Event
	Reason string
}

// Decide returns the event that moves the cluster from its persisted state to the state the
// snapshot calls for. It is pure, and deciding again on the same snapshot with the new state
// yields no event. The checks, in order:
//
//  0. A new object (Initial) bootstraps, or goes Invalid.
//  1. A spec problem means Invalid, whatever the state: nothing is deleted there.
//  2. A cluster formed once (Snapshot.FormedOnce: status.formedAt, which no state forgets) is
//     healed in place, never re-bootstrapped, whatever it lost meanwhile: coming back from
//     Invalid it goes straight to Active (or Upgrading), so that its lost pods are replaced and
//     a shard that lost every copy of its data is served again as a loss (DataLost), exactly
//     as if the pods had died while it was Active. It is Upgrading while its nodes are not yet
//     what the spec asks for (Snapshot.Changing: nodes of an older spec, replicas or shards
//     added or removed), and Active again once they are and the cluster is formed and in
//     agreement. Healing a failed node is not a change.
//  3. Otherwise the cluster goes to the furthest state it has reached: Active once formed and in
//     agreement (or, coming back from Invalid, once it is serving), Forming once every pod
//     runs with an IP (and it stays Forming while a lost pod is replaced), else Bootstrapping.
func Decide(s Snapshot) Decision {
	current := s.State
	target, reason := decideTarget(current, s)
	if target == current {
		return Decision{}
	}
	return Decision{Event: eventTo(target), Reason: reason}
}

func decideTarget(current State, s Snapshot) (State, string) {
	switch {
	case s.SpecProblem != "":
		return Invalid, s.SpecProblem
	case current == Initial:
		return Bootstrapping, "new cluster"
	case s.FormedOnce():
		return decideFormed(current, s)
	case s.Formed():
		return Active, "cluster formed and in agreement"
	case current == Invalid && s.Serving():
		return Active, "cause fixed; cluster is serving"
	case s.PodsUp() || current == Forming:
		return Forming, "every pod is running with an IP"
	default:
		return Bootstrapping, "waiting for pods"
	}
}

// decideFormed is rule 2, for a cluster formed once.
func decideFormed(current State, s Snapshot) (State, string) {
	switch current {
	case Active, Upgrading, Invalid:
		if why := s.Changing(); why != "" {
			return Upgrading, why
		}
	default:
		// Bootstrapping or Forming with the marker set: a status that an older operator
		// rewrote after this one marked the cluster formed. Back to Active first (the table
		// allows Upgrading only from Active); the next pass sees what changed.
		return Active, "the cluster was formed once; healing it in place"
	}
	switch {
	case current == Upgrading && s.Formed():
		return Active, "every node is up to date and the topology is the spec's"
	case current == Invalid:
		return Active, "cause fixed; the cluster was formed once and is healed in place"
	default:
		return current, ""
	}
}
