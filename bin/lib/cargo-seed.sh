# shellcheck shell=bash
# Sourced by bin/modern and bin/cross-build. A cargo build for another Ruby starts from nothing (minutes on
# two cores), yet most of it does not depend on Ruby (ferrolock-core, redis, rustls…): seed_profile_dir
# FROM TO copies a built profile dir (…/release) without what is built against a Ruby or its headers
# (rb-sys and its bindgen/libclang build helpers, magnus, the ferrolock extension), which cargo then builds
# again. Nothing is done when TO exists or FROM holds no build.
seed_profile_dir() {
  local from=$1 to=$2
  [[ -d $to || ! -d $from/.fingerprint ]] && return 0
  mkdir -p "$(dirname "$to")"
  rm -rf "$to.partial"
  cp -a "$from" "$to.partial"
  find "$to.partial" -mindepth 2 -maxdepth 2 \( -path '*/.fingerprint/*' -o -path '*/build/*' -o -path '*/deps/*' \) \
    -regextype posix-extended \
    -regex '.*/(lib)?(rb[-_]sys|rb[-_]sys[-_]env|rb[-_]sys[-_]build|bindgen|clang[-_]sys|magnus|ferrolock)-[0-9a-f]{16}(\..*)?' \
    -exec rm -rf {} +
  rm -f "$to.partial"/libferrolock.*
  mv "$to.partial" "$to"
}
