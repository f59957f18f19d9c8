#!/usr/bin/env bash
# PruneX suite: `./run_all.sh` runs every experiment then every figure; `./run_all.sh test` runs
# the test suite. Both set the environment up themselves (idempotently): an already active
# environment that provides the packages (conda, a cluster module, a venv) is used as it is,
# otherwise a .venv is built in the checkout from requirements.txt.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)

say() { printf '[run_all] %s\n' "$*"; }

# -- environment ---------------------------------------------------------------------------------
have_packages() {
  "$1" - <<'PY' 2>/dev/null
import importlib.util, sys
mods = ["torch", "torchvision", "submitit", "pandas", "pyarrow", "matplotlib", "seaborn", "sklearn", "tqdm", "pytest", "ruff"]
sys.exit(0 if all(importlib.util.find_spec(m) for m in mods) else 1)
PY
}

bootstrap() {
  # The checkout is put on PYTHONPATH (also for the processes submitit starts), not installed: one
  # environment can then serve several checkouts without pointing at the wrong one.
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  if [ -n "${CONDA_PREFIX:-}${VIRTUAL_ENV:-}" ] && [ "${VIRTUAL_ENV:-}" != "$ROOT/.venv" ] \
     && command -v python >/dev/null && have_packages python; then
    PY=$(command -v python)
    say "using the active environment ($PY)"
    return
  fi
  local want
  want=$(cat requirements.txt | sha256sum | cut -c1-16)
  # .venv is a link to a shared environment keyed by requirements.txt (torch's CUDA build is ~5 GB;
  # every checkout of the same pins shares it). PRUNEX_VENV_CACHE=none builds a private .venv.
  local cache="${PRUNEX_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/prunex}"
  local target="$ROOT/.venv"
  if [ "$cache" != none ] && { [ -L .venv ] || [ ! -e .venv ]; }; then
    target="$cache/venv-$want"
    mkdir -p "$cache"
  fi
  if [ "$(cat "$target/.prunex-stamp" 2>/dev/null)" != "$want" ]; then
    say "building the environment in $target (first run: a few minutes)"
    rm -rf "$target"
    "${PYTHON:-python3}" -m venv "$target"
    "$target/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt
    echo "$want" > "$target/.prunex-stamp"
  fi
  if [ "$target" != "$ROOT/.venv" ]; then
    ln -sfn "$target" .venv
  fi
  PY="$ROOT/.venv/bin/python"
}

run_tests() {
  # The mini Slurm cluster tests need Slurm and munge (Debian packages) and root; elsewhere they skip
  # with the install command.
  if [ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ] && command -v apt-get >/dev/null; then
    bash .ci/install-minicluster.sh || say "could not install the mini cluster's packages; its tests will skip"
  fi
  say "ruff"
  "$PY" -m ruff check .
  "$PY" -m ruff format --check .
  say "pytest"
  set +e
  "$PY" -m pytest -q "$@"
  local rc=$?
  set -e
  if [ $rc -eq 5 ]; then
    say "pytest collected no tests: failing"
    return 1
  fi
  return $rc
}

usage() {
  cat <<'TXT'
usage: ./run_all.sh [test [PYTEST ARGS]] [--profile smoke|local|paper] [--executor debug|local|slurm]
                    [--results DIR] [--only EXPERIMENT] [--figures-only]
With no option: every experiment, then every figure and the claims report. The profile is `paper`
on a real Slurm cluster and `local` elsewhere (on a mini Slurm cluster where root allows).
--figures-only regenerates figures/ from saved logs (default: saved-logs/local) without training.
TXT
}

main_job() {
  local profile="" executor="" results="" only="" figures_only=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --profile) profile=$2; shift 2 ;;
      --executor) executor=$2; shift 2 ;;
      --results) results=$2; shift 2 ;;
      --only) only=$2; shift 2 ;;
      --figures-only) figures_only=1; shift ;;
      -h|--help) usage; return 0 ;;
      *) say "unknown option $1"; usage; return 2 ;;
    esac
  done
  local cluster_dir="$ROOT/.prunex-cluster" cluster_up=0 rc=0
  if [ $figures_only = 1 ]; then
    results=${results:-saved-logs/local}
    say "figures only: from $results (no training)"
  else
    if [ -z "$profile" ]; then
      if command -v sinfo >/dev/null && [ -z "${PRUNEX_MINICLUSTER_DIR:-}" ] && sinfo -h >/dev/null 2>&1; then
        profile=paper; executor=${executor:-slurm}
        say "a Slurm cluster answers (sinfo): profile paper on it"
      else
        profile=local
      fi
    fi
    if [ "$profile" != paper ] && [ -z "$executor" ]; then
      if [ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ] && bash .ci/install-minicluster.sh >/dev/null; then
        say "no Slurm cluster; root on Linux: bringing a 2-node mini Slurm cluster up (links shaped by tc at 1 Gbit/s)"
        "$PY" -m prunex.minicluster up --nodes 2 --cpus-per-node 2 --inter-bw 1gbit --dir "$cluster_dir"
        cluster_up=1
        trap '"$PY" -m prunex.minicluster down --dir "'"$cluster_dir"'" >/dev/null 2>&1 || true' EXIT INT TERM
        eval "$("$PY" -m prunex.minicluster env --dir "$cluster_dir")"
        executor=slurm
      else
        say "no Slurm cluster and no root for a mini cluster: local executor with the alpha-beta link model"
        executor=local
      fi
    fi
    results=${results:-results/$profile}
    say "profile $profile, executor ${executor:-default}, results in $results"
    local args=(--profile "$profile" --results "$results")
    [ -n "$executor" ] && args+=(--executor "$executor")
    [ -n "$only" ] && args+=(--only "$only")
    "$PY" -m experiments.all "${args[@]}" || rc=$?
    if [ $cluster_up = 1 ]; then
      "$PY" -m prunex.minicluster down --dir "$cluster_dir" || true
      trap - EXIT INT TERM
    fi
  fi
  "$PY" -m analysis.all --results "$results" --out figures || rc=$?
  say "figures: $ROOT/figures/  report: $ROOT/figures/REPORT.md"
  [ $rc = 0 ] || say "some runs or figures failed (exit code $rc); see the lines above"
  return $rc
}

bootstrap
case "${1:-}" in
  test) shift; run_tests "$@" ;;
  *) main_job "$@" ;;
esac
