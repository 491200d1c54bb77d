package version

import "testing"

func TestCapabilities(t *testing.T) {
	for _, c := range []struct {
		in    string
		major int
		nine  bool
	}{
		{"", 0, false}, {"nonsense", 0, false}, {"8.0.1", 8, false}, {"8.1.0", 8, false},
		{"9.0.0", 9, true}, {"9.1.2", 9, true}, {"10.0.0", 10, true}, {"9", 9, true},
	} {
		v := Parse(c.in)
		if v.Major() != c.major {
			t.Errorf("%q: major %d, want %d", c.in, v.Major(), c.major)
		}
		for name, got := range map[string]bool{
			"AtomicSlotMigration": v.AtomicSlotMigration(), "SafeACLLoad": v.SafeACLLoad(), "HandsOverOnSIGTERM": v.HandsOverOnSIGTERM(),
		} {
			if got != c.nine {
				t.Errorf("%q: %s %v, want %v", c.in, name, got, c.nine)
			}
		}
	}
}
