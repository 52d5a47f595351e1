# shellcheck shell=bash
# Sourced by bin/modern, bin/arm64 and bin/cross-build: the first Debian mirror this machine's apt reads
# (deb822 .sources or one-line sources.list), skipping the security archive.
apt_mirror() {
  local files=() line url
  shopt -s nullglob
  files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list)
  shopt -u nullglob
  for file in "${files[@]}"; do
    [[ -r $file ]] || continue
    while read -r line; do
      case $line in
        URIs:*) url=${line#URIs:} ;;
        deb\ *) url=$(awk '{for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; exit }}' <<<"$line") ;;
        *) continue ;;
      esac
      for url in $url; do
        [[ $url == *security* ]] && continue
        echo "${url%/}"
        return 0
      done
    done <"$file"
  done
  return 1
}
