# Sourced by install-deps.sh and install-peer-deps.sh: install_packages NAME PACKAGE... installs
# the Debian packages that are missing (as root), or says all are present. Safe to run again.
install_packages() {
  local name=$1
  shift
  local missing=() package
  for package in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$package")
    fi
  done
  if ((${#missing[@]} == 0)); then
    echo "$name: all $# packages present"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "$name: run as root to install: ${missing[*]}" >&2
    return 1
  fi
  echo "$name: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
