# The Debian 13 root of scripts/check-debian13.sh and scripts/check-debian13-cuda.sh: made with
# debootstrap once, mounted for the run, and a clean clone of tune in it. Sourced, not run.
#
# The caller sets SUITE and may set `root` (default $TUNE_DEBIAN13_ROOT, else
# /var/cache/tune/debian13) and `seed_root` (a root to copy instead of running debootstrap).

DEBIAN13_DEFAULT_MIRROR=http://deb.debian.org/debian
root=${root:-${TUNE_DEBIAN13_ROOT:-/var/cache/tune/debian13}}
seed_root=${seed_root:-}
root_mounts=()

log() { echo "debian13: $*" >&2; }
die() {
  echo "debian13: ERROR: $*" >&2
  exit 1
}

# The Debian mirror(s) of this system's apt sources: entries for its own release suite and
# component main (not -security, -updates, nor third-party repositories), as apt reads them.
system_debian_mirror() {
  local codename="" uri rel comp ident origin
  [ -r /etc/os-release ] && codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || return 0
  apt-get indextargets --format '$(REPO_URI)|$(RELEASE)|$(COMPONENT)|$(IDENTIFIER)|$(ORIGIN)' \
      2>/dev/null | sort -u | while IFS='|' read -r uri rel comp ident origin; do
    [ "$rel" = "$codename" ] && [ "$comp" = main ] && [ "$ident" = Packages ] || continue
    case "$origin" in Debian | '$(ORIGIN)' | '') echo "${uri%/}" ;; esac
  done | sort -u | head -n 1
}

# http, as Ubuntu's own sources: apt checks the archive's signature, and a root trusts no
# proxy's certificate authority before its packages are in.
UBUNTU_DEFAULT_MIRROR=http://archive.ubuntu.com/ubuntu
# The Ubuntu Archive Automatic Signing Key (2018): the keyring must hold it.
UBUNTU_ARCHIVE_KEY=F6ECB3762474EDA9D21B7022871920D1991BC93C

root_is_ubuntu() {
  case "$SUITE" in focal | jammy | mantic | noble | oracular | plucky) return 0 ;; esac
  return 1
}

# Ubuntu's archive keyring for debootstrap: the system's (ubuntu-keyring), else the package
# fetched from the Ubuntu archive and accepted only if it holds UBUNTU_ARCHIVE_KEY.
ubuntu_keyring() {
  local system=/usr/share/keyrings/ubuntu-archive-keyring.gpg
  local cache=/var/cache/tune/ubuntu-keyring mirror=${TUNE_UBUNTU_MIRROR:-$UBUNTU_DEFAULT_MIRROR}
  if [ -f "$system" ]; then
    echo "$system"
    return 0
  fi
  if [ ! -f "$cache/ubuntu-archive-keyring.gpg" ]; then
    mkdir -p "$cache"
    curl -sSfo "$cache/keyring.deb" \
      "$mirror/pool/main/u/ubuntu-keyring/ubuntu-keyring_2021.03.26_all.deb" ||
      die "cannot fetch Ubuntu's keyring from $mirror (apt-get install ubuntu-keyring instead)"
    dpkg-deb --fsys-tarfile "$cache/keyring.deb" |
      tar -xOf - ./usr/share/keyrings/ubuntu-archive-keyring.gpg > "$cache/candidate.gpg"
    gpg --show-keys --with-colons "$cache/candidate.gpg" 2>/dev/null |
      grep -q "^fpr:::::::::$UBUNTU_ARCHIVE_KEY:" ||
      die "the fetched Ubuntu keyring lacks the archive key $UBUNTU_ARCHIVE_KEY"
    mv "$cache/candidate.gpg" "$cache/ubuntu-archive-keyring.gpg"
  fi
  echo "$cache/ubuntu-archive-keyring.gpg"
}

# Runs $1 with bash inside the root, as root, in a clean environment.
root_run() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive CCACHE_DIR=/var/cache/ccache CCACHE_BASEDIR=/src \
    /bin/bash -c "$1"
}

root_debootstrap() { # makes $root from nothing (or a copy of $seed_root)
  local mirror partial=$root.partial
  rm -rf "$partial"
  if [ -n "$seed_root" ] && [ -f "$seed_root/.tune-root-ready" ]; then
    # One file system only: not the /proc, /sys and /dev a run of the seed may have mounted.
    log "copying $seed_root to $root"
    mkdir -p "$partial"
    (cd "$seed_root" && tar --one-file-system --exclude=./src --exclude=./var/cache/ccache \
       --exclude='./tmp/*' -cf - .) | (cd "$partial" && tar -xpf -)
    mv "$partial" "$root"
    return 0
  fi
  command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found (apt-get install debootstrap)"
  local components=main,contrib,non-free,non-free-firmware
  local -a extra=()
  if root_is_ubuntu; then
    mirror=${TUNE_UBUNTU_MIRROR:-$UBUNTU_DEFAULT_MIRROR}
    components=main,universe
    extra=(--keyring="$(ubuntu_keyring)")
  else
    mirror=$(system_debian_mirror)
    mirror=${mirror:-$DEBIAN13_DEFAULT_MIRROR}
  fi
  log "debootstrap $SUITE from $mirror into $root (once; a few minutes)"
  mkdir -p "$(dirname "$root")"
  # Debian 12's debootstrap knows Ubuntu up to jammy; later releases bootstrap alike (gutsy's script).
  local script=()
  [ -e "/usr/share/debootstrap/scripts/$SUITE" ] || script=(/usr/share/debootstrap/scripts/gutsy)
  debootstrap --variant=minbase --components="$components" "${extra[@]}" \
    "$SUITE" "$partial" "$mirror" "${script[@]}" > "$root.debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -n 5 "$root.debootstrap.log") (log: $root.debootstrap.log)"
  cat > "$partial/etc/apt/sources.list" <<EOF
deb $mirror $SUITE ${components//,/ }
deb $mirror $SUITE-updates ${components//,/ }
EOF
  # Package scripts must not start services (postgresql) in the chroot.
  printf '#!/bin/sh\nexit 101\n' > "$partial/usr/sbin/policy-rc.d"
  chmod 755 "$partial/usr/sbin/policy-rc.d"
  touch "$partial/.tune-root-ready"
  mv "$partial" "$root"
}

root_unmount() {
  local i
  for ((i = ${#root_mounts[@]} - 1; i >= 0; i--)); do
    umount "${root_mounts[$i]}" 2>/dev/null || umount -l "${root_mounts[$i]}" || true
  done
  root_mounts=()
}

root_mount() { # root_mount TARGET mount-arguments...: mounts, and remembers it for the trap
  local target=$root$1
  shift
  mkdir -p "$target"
  mountpoint -q "$target" && umount -l "$target"  # left over from a killed run
  mount "$@" "$target"
  root_mounts+=("$target")
}

# Checks, the root (debootstrap once), one run at a time (flock), and the mounts with their trap.
root_prepare() {
  [ "$(id -u)" = 0 ] || die "must run as root (debootstrap, mount and chroot need it)"
  command -v chroot >/dev/null 2>&1 || die "chroot not found"
  mkdir -p "$(dirname "$root")"
  exec 8>"$root.lock"
  flock -n 8 || die "another run uses $root ($root.lock)"
  [ -f "$root/.tune-root-ready" ] || { rm -rf "$root"; root_debootstrap; }
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  cp /etc/hosts "$root/etc/hosts" 2>/dev/null || true
  trap root_unmount EXIT
  trap 'exit 130' INT TERM
  root_mount /proc -t proc proc
  root_mount /sys -t sysfs sysfs
  root_mount /dev --bind /dev
  root_mount /dev/pts --bind /dev/pts
  root_mount /dev/shm --bind /dev/shm
}

# A clean clone of $1's HEAD at ROOT/src/tune (the last run's is replaced).
root_clone() {
  local src=$1 head
  head=$(git -C "$src" rev-parse HEAD)
  [ -z "$(git -C "$src" status --porcelain --untracked-files=no)" ] ||
    log "note: uncommitted changes in $src are not in the clone (it is HEAD, $head)"
  rm -rf "$root/src/tune"
  mkdir -p "$root/src"
  git clone -q --no-checkout "$src" "$root/src/tune"
  git -C "$root/src/tune" checkout -q --detach "$head"
  log "clean clone of $(git -C "$src" rev-parse --short HEAD) in $root/src/tune"
}
