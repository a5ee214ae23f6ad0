# Sourced by the scripts/gpu_*.sh that run on the GPU box: the carried wheels ($1/whl, Python 3.12) into
# /tmp/site, this checkout importable as the package g3align (links in /tmp/pkg), and $1/bin on PATH.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$1"/whl/*.whl >/dev/null 2>&1 || true
mkdir -p /tmp/pkg/g3align
for f in g3align/*; do ln -sfn "$PWD/$f" /tmp/pkg/g3align/; done
for d in aligner index kernels; do ln -sfn "$PWD/$d" /tmp/pkg/g3align/$d; done
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1 PATH="$PWD/$1/bin:/tmp/site/bin:$PATH"
