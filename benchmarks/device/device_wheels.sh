#!/usr/bin/env bash
# Everything real CybORG needs on a machine that has Python with numpy (and torch/numba) but no gymnasium, no CybORG
# and no network: binary wheels for manylinux x86_64 and CPython 3.10-3.13 in .whl/, plus the CAGE2 scenario data in
# .whl/scenario (csle-cyborg ships without it). Run here, where PyPI is reachable; .whl/ is git-ignored (carry it).
#
# On the other machine (any of those Python versions), what benchmarks/device/device_env.sh does when sourced:
#   python3 -m pip install -q --no-index --no-deps --find-links .whl --target "$SITE" \
#       csle-cyborg gymnasium paramiko prettytable PyYAML cryptography bcrypt PyNaCl cffi pycparser \
#       farama-notifications wcwidth invoke cloudpickle typing-extensions
#   export PYTHONPATH="$SITE:."   (SITE: a fresh temporary folder)
# (--no-deps: numpy is the machine's own; every other dependency is in the list.)
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=.whl
SCENARIO="${WORKFLOW_RL_CAGE2_SCENARIO:-../shared/cage2/scenario}"   # as the Makefile: beside the checkout
PIP="${PIP:-python3 -m pip}"
mkdir -p "$DEST"

# pinned to the versions the tests run with here (csle-cyborg 0.0.3's dependency closure, numpy excluded)
PURE="csle-cyborg==0.0.3 gymnasium==1.4.0 paramiko==5.1.0 prettytable==3.18.0 farama-notifications==0.0.6
      wcwidth==0.9.4 invoke==3.0.3 cloudpickle==3.1.3 typing-extensions==4.16.0 pycparser==3.12"
BINARY="PyYAML==6.0.4 cryptography==50.0.2 bcrypt==5.0.0 PyNaCl==1.6.2 cffi==2.1.1"

# pure-python wheels once
$PIP download -q --no-deps --only-binary=:all: --dest "$DEST" $PURE 2> >(grep -v "is ignored" >&2)
# compiled ones per Python version (abi3 wheels such as cryptography's resolve to one file for all of them)
for v in 3.10 3.11 3.12 3.13; do
  $PIP download -q --no-deps --only-binary=:all: --dest "$DEST" \
      --python-version "$v" --implementation cp --platform manylinux2014_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64 \
      $BINARY 2> >(grep -v "is ignored" >&2)
done

# the scenario data csle-cyborg reads (workflow-rl ... --scenario .whl/scenario installs it next to the package)
if [ -f "$SCENARIO/Scenario2.yaml" ]; then
  rm -rf "$DEST/scenario" && cp -r "$SCENARIO" "$DEST/scenario"
else
  echo "warning: no Scenario2.yaml in $SCENARIO (set WORKFLOW_RL_CAGE2_SCENARIO): the CybORG run will need --scenario" >&2
fi
ls "$DEST"
du -sh "$DEST"
