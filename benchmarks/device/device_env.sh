# Sourced by the device scripts: install the wheels of benchmarks/device/device_wheels.sh (carried as .whl/) into
# a fresh temporary folder ($SITE) and put them and the checkout on PYTHONPATH; without .whl/ the machine's own
# packages and the checkout.
if [ -d .whl ]; then
  SITE="${SITE:-$(mktemp -d)}"
  python3 -m pip install -q --no-index --no-deps --find-links .whl --target "$SITE" csle-cyborg gymnasium paramiko \
    prettytable PyYAML cryptography bcrypt PyNaCl cffi pycparser farama-notifications wcwidth invoke cloudpickle \
    typing-extensions >/dev/null 2>&1
  export PYTHONPATH="$SITE:."
else
  export PYTHONPATH=.
fi
