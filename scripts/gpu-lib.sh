# shellcheck shell=bash
# What scripts/gpu-host-tools.sh uses (the proof does its own in Python); source it from the
# repository root. Needs PYTHON (an interpreter of 3.11 or newer; the twinbuild model is standard library).

# tb_pin VARIANT NAME FIELD: one value from pins/manifest.toml (the variant's amd64 image),
# through twinbuild's own model. NAME "-" reads the variant: FIELD vendor, toolkit, or gpu_archs
# (';'-separated).
tb_pin() {
  PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - "$@" <<'EOF'
import sys
from twinbuild.manifest.loader import load
variant, name, field = sys.argv[1:]
manifest = load()
if name == "-":
    value = getattr(manifest.variant(variant), field)
    print(";".join(value) if isinstance(value, tuple) else value)
else:
    pin = next(p for p in manifest.resolve(manifest.image(variant, "linux/amd64")) if p.name == name)
    print(getattr(pin.values, field) or "")
EOF
}

# tb_library_path: the folders holding the CUDA runtime and NCCL that PYTHON's torch brings (its
# nvidia-* wheels), then CUDA_HOME's: what torch_memory_saver's preload library (libcudart.so.N)
# and all_reduce_perf (libnccl.so.2) need on a bare host, where nothing else puts them on the path.
tb_library_path() {
  "$PYTHON" - "${CUDA_HOME:-}" <<'EOF'
import glob, os, site, sys
roots = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
dirs = []
for root in roots:
    for pattern in ("nvidia/*/lib/libcudart.so.*", "nvidia/*/lib/libnccl.so.*"):
        for hit in sorted(glob.glob(os.path.join(root, pattern))):
            d = os.path.dirname(hit)
            if d not in dirs:
                dirs.append(d)
home = sys.argv[1]
if home and glob.glob(os.path.join(home, "lib64", "libcudart.so*")):
    dirs.append(os.path.join(home, "lib64"))
print(":".join(dirs))
EOF
}
