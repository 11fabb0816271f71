# A minimal image around the static binary (CGO_ENABLED=0): nothing but
# the exporter, so there is no shell, libc or package manager to patch or
# to exploit. `make image` (scripts/image) cross-compiles the binary for
# linux/amd64 and linux/arm64 as xdp_exporter-linux-ARCH and builds one
# image per platform into a manifest list with podman; nothing runs under
# emulation, since the image only copies the binary of its platform. By
# hand, with Docker's buildx:
#
#   scripts/build-binary amd64 xdp_exporter xdp_exporter-linux-amd64
#   scripts/build-binary arm64 xdp_exporter xdp_exporter-linux-arm64
#   docker buildx build --platform linux/amd64,linux/arm64 -t xdp_exporter .
#
# Run it in the host's network namespace (the devices it watches live
# there) with the capabilities of docs/privileges.md and nothing else:
#
#   docker run -d --name xdp_exporter --network host \
#     --cap-drop ALL --cap-add BPF --cap-add PERFMON --cap-add NET_ADMIN --cap-add SYS_ADMIN \
#     --security-opt no-new-privileges --read-only --ulimit memlock=-1 \
#     xdp_exporter
#
# No volume is needed: nothing is pinned in /sys/fs/bpf (programs detach
# when the process exits), tracepoints attach as tp_btf (no tracefs), and
# /sys/kernel/btf, /proc/stat and /proc/softirqs are the same in the
# container as on the host. docs/install.md explains each option.
FROM scratch

ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="xdp_exporter" \
      org.opencontainers.image.description="Prometheus exporter for XDP, NAPI, NIC (ethtool) and per-CPU softirq telemetry" \
      org.opencontainers.image.source="https://github.com/xdp-exporter/xdp_exporter" \
      org.opencontainers.image.documentation="https://github.com/xdp-exporter/xdp_exporter/blob/main/docs/install.md" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

# Set by the builder for each platform it builds.
ARG TARGETARCH
COPY xdp_exporter-linux-${TARGETARCH} /bin/xdp_exporter

EXPOSE 9739
# Root inside the container, but only with the capabilities granted above:
# a non-root user would not get added capabilities in its effective set.
USER 0:0
ENTRYPOINT ["/bin/xdp_exporter"]
# Arguments given to `docker run` replace this; keep the flag when you do.
CMD ["--runtime.drop-capabilities"]
