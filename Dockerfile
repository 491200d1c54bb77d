# The operator image: a static Go binary on distroless, running as the non-root user 65532.
#   docker build -t gomomento/valkey-operator:0.1.0 .
# The tag is the chart's appVersion (chart/Chart.yaml), which manifests/operator.yaml uses too.
FROM golang:1.26 AS build
WORKDIR /src
# As the Makefile builds: go.mod may lag its imports until the next tidy.
ENV GOFLAGS=-mod=mod
COPY go.mod go.sum ./
COPY main.go ./
COPY acl/ acl/
COPY apis/ apis/
COPY controllers/ controllers/
COPY fanout/ fanout/
COPY fsm/ fsm/
COPY liveconf/ liveconf/
COPY logging/ logging/
COPY metrics/ metrics/
COPY plan/ plan/
COPY resources/ resources/
COPY slot/ slot/
COPY tlsmaterial/ tlsmaterial/
COPY valkey/ valkey/
COPY version/ version/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/valkey-operator .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/valkey-operator /valkey-operator
USER 65532:65532
ENTRYPOINT ["/valkey-operator"]
