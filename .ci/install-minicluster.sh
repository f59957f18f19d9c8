#!/usr/bin/env bash
# Install the Debian packages the suite uses: what `python -m prunex.minicluster up` needs (Slurm, munge,
# iproute2), and the real Fashion-MNIST (dataset-fashion-mnist, read offline by prunex.training.data).
# Idempotent: does nothing when everything is already there; runs `apt-get update` only when installing.
set -euo pipefail

PKGS="slurm-wlm munge iproute2 dataset-fashion-mnist"
TOOLS="ip tc nsenter slurmctld slurmd munged sinfo sbatch srun scontrol squeue scancel"

missing=""
for t in $TOOLS; do
  PATH="$PATH:/usr/sbin:/sbin" command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || missing="$missing fashion-mnist"
if [ -z "$missing" ]; then
  echo "install-minicluster: all tools present, nothing to do"
  exit 0
fi
echo "install-minicluster: missing:$missing; installing $PKGS"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# the packages' own services (munge, slurmd) are not used: the minicluster runs private daemons
$SUDO apt-get install -y $PKGS
