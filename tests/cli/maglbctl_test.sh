#!/usr/bin/env bash
# maglbctl table / diff on real config files: output, exit codes, operator-facing errors.
set -euo pipefail
CTL=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# table: every VIP of the example, with a fingerprint and shares.
out=$("$CTL" table --config "$SRC/config/example.toml")
echo "$out"
grep -q 'vip "web"' <<<"$out" || fail "no web VIP"
grep -q 'vip "dns"' <<<"$out" || fail "no dns VIP"
[ "$(grep -c 'fingerprint [0-9a-f]\{16\}' <<<"$out")" -eq 2 ] || fail "fingerprints"
grep -q 'max/avg 1.0000  min/avg 1.0000' <<<"$out" || fail "equal-weight balance line"

# --dump: exactly M lines, names only, counts match the summary.
"$CTL" table --config "$SRC/config/example.toml" --vip web --dump > "$tmp/dump"
[ "$(wc -l < "$tmp/dump")" -eq 65537 ] || fail "dump length"
web_c_entries=$(grep -E '^  web-c ' <<<"$out" | awk '{print $4}')
[ "$(grep -cx web-c "$tmp/dump")" -eq "$web_c_entries" ] || fail "dump counts differ from summary"
if "$CTL" table --config "$SRC/config/example.toml" --dump >/dev/null 2>"$tmp/err"; then
  fail "--dump with several VIPs must need --vip"
fi
grep -q 'choose one with --vip' "$tmp/err" || fail "dump error message"

# Same fingerprint however the backends are listed (reversed order).
/usr/bin/python3 - "$SRC/config/example.toml" "$tmp/reversed.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
head, *vips = re.split(r'(?m)^\[\[vip\]\]\n', text)
out = [head]
for v in vips:
    parts = re.split(r'(?m)^  \[\[vip\.backend\]\]\n', v)
    out.append('[[vip]]\n' + parts[0] + ''.join('  [[vip.backend]]\n' + p for p in reversed(parts[1:])))
open(sys.argv[2], 'w').write(''.join(out))
PY
fp1=$("$CTL" table --config "$SRC/config/example.toml" | grep fingerprint)
fp2=$("$CTL" table --config "$tmp/reversed.toml" | grep fingerprint)
[ "$fp1" = "$fp2" ] || fail "fingerprint depends on backend order"

# All backends draining: no table, and the tool says so.
cat > "$tmp/drain.toml" <<'TOML'
[[vip]]
name = "v"
address = "10.0.0.1"
  [[vip.backend]]
  name = "a"
  address = "10.1.0.1"
  weight = 0
TOML
out=$("$CTL" table --config "$tmp/drain.toml")
grep -q 'no table: all 1 backends have weight 0' <<<"$out" || fail "draining VIP message: $out"

# A bad config: non-zero exit, file:line: key in the message.
sed 's/table_size = 65537/table_size = 65536/' "$SRC/config/example.toml" > "$tmp/bad.toml"
if "$CTL" table --config "$tmp/bad.toml" >/dev/null 2>"$tmp/err"; then fail "bad config accepted"; fi
grep -qE "bad.toml:[0-9]+: vip\[\"web\"\]\.table_size: 65536 must be a prime" "$tmp/err" || fail "error text: $(cat "$tmp/err")"

# diff: identical configs move nothing; adding a backend moves about 1/(N+1) = 25% for web.
out=$("$CTL" diff "$SRC/config/example.toml" "$SRC/config/example.toml")
[ "$(grep -c 'no flow changes backend' <<<"$out")" -eq 2 ] || fail "identical diff: $out"
sed 's/^  weight = 2$/  weight = 2\n\n  [[vip.backend]]\n  name = "web-d"\n  address = "203.0.113.4"\n  weight = 2/' \
  "$SRC/config/example.toml" > "$tmp/add.toml"
out=$("$CTL" diff "$SRC/config/example.toml" "$tmp/add.toml")
echo "$out"
grep -qE 'ideal minimum for this change: 33\.333%' <<<"$out" || fail "ideal for adding weight 2 of 6"
moved=$(grep -oE 'flows that change backend: [0-9.]+' <<<"$out" | awk '{print $NF}')
awk -v m="$moved" 'BEGIN { exit !(m >= 33.3 && m < 36) }' || fail "moved $moved% not near 33.3%"
grep -qE '^  web-d +\(new\) 2 ' <<<"$out" || fail "new backend row"
# diff into an all-draining VIP says that it will have no table.
sed 's/^  weight = 2$/  weight = 0/; s/^  weight = 1$/  weight = 0/' "$SRC/config/example.toml" > "$tmp/drain_all.toml"
grep -q 'weight = 0' "$tmp/drain_all.toml" || fail "drain_all.toml not edited"
out=$("$CTL" diff "$SRC/config/example.toml" "$tmp/drain_all.toml")
echo "$out"
grep -q 'after the change: no table, all 3 backends have weight 0' <<<"$out" || fail "no-table diff message"
grep -qE 'fingerprint [0-9a-f]{16} -> none' <<<"$out" || fail "empty table fingerprint shown as none"
echo "maglbctl tests passed"
