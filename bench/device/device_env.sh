# Sourced by the device scripts (check_h200.sh, profile_h200.sh) in the checkout's root on the GPU machine:
# the build was made here under /work/main/build-gpu and finds its libraries, test data and plugins there, so
# /work/main, its build-gpu (the staged .devrun/stage) and the Fashion-MNIST path are linked to this copy;
# then the staged Debian libraries join LD_LIBRARY_PATH. Sets root (this checkout) and B (the programs).
set -u
root=$PWD
mkdir -p /work; [ -e /work/main ] || ln -s "$root" /work/main
[ -e /work/main/build-gpu ] || ln -s "$root/.devrun/stage" /work/main/build-gpu
mkdir -p /usr/share/datasets && { [ -e /usr/share/datasets/fashion-mnist ] || ln -s "$root/.devrun/fashion-mnist" /usr/share/datasets/fashion-mnist; }
source "$root/.devrun/stage/devenv.sh"; export LD_LIBRARY_PATH="$root/.devrun/stage/lib:$LD_LIBRARY_PATH"
B=/work/main/build-gpu/bin
