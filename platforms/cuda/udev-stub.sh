#!/usr/bin/env bash
# For machines where udev does not run (minimal VMs, containers without
# /run/udev): cuFile looks up each file's block device in udev's database and
# refuses to register files whose device has no entry ("udev property not
# found: ID_FS_USAGE" in cufile.log, hipFileHandleRegister returns
# hipFileHandleNotRegistered). This writes the two properties cuFile reads for
# the block device under each given folder (default: the temporary folder).
# Needs root. Changes nothing where udev already has an entry.
#
# Usage: sudo bash platforms/cuda/udev-stub.sh [FOLDER ...]
set -euo pipefail

[ "$#" -gt 0 ] || set -- "${TMPDIR:-/tmp}"
for folder in "$@"; do
    dev="$(stat -c '%d' "$folder")"
    major=$(( ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff) ))
    minor=$(( (dev & 0xff) | ((dev >> 12) & ~0xff) ))
    if [ "$major" -eq 0 ]; then
        echo "udev-stub: $folder is not on a block device (nothing to do)"
        continue
    fi
    fstype="$(findmnt -n -o FSTYPE --target "$folder" 2>/dev/null || stat -f -c '%T' "$folder")"
    entry="/run/udev/data/b$major:$minor"
    if [ -e "$entry" ] && grep -q '^E:ID_FS_USAGE=' "$entry"; then
        echo "udev-stub: $entry already describes $folder"
        continue
    fi
    mkdir -p /run/udev/data
    printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$fstype" >> "$entry"
    echo "udev-stub: wrote $entry for $folder ($fstype)"
done
