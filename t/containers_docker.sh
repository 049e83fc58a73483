#!/usr/bin/env bash
# containers_docker.sh — t/containers.sh's scenarios through docker instead of
# podman (issue 16: docker as the second engine): a dockerd of the test's own
# (data, exec root and socket in its temp dir, vfs, no bridge, no iptables),
# agents started with --container-engine docker. The GPU/CDI scenario is
# podman's only (docker takes --gpus). Skipped (77) when dockerd is not
# installed or does not start here.
CTR_ENGINE=docker exec bash "$(dirname "$0")/containers.sh"
