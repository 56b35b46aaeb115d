#!/usr/bin/env bash
# tune installed like a Unix tool: `cmake --install` into a temporary prefix, then the installed
# tune run from / (outside the source and build trees): --version, python-path, the man page,
# the bash completion, and a short train study whose LibTorch plugin and SentencePiece shim are
# the installed ones (LD_DEBUG shows where each library was loaded from). Then, with
# --package, `cpack -G DEB` and the package's control fields.
#
# Usage: install_test.sh BUILD_DIR SOURCE_DIR [--package]
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
package=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
tune="$prefix/bin/tune"
cd /

version=$("$tune" --version)
echo "$version"
case "$version" in "tune "*) ;; *) fail "tune --version printed: $version" ;; esac
readelf -d "$tune" | grep -q 'R.*PATH.*\$ORIGIN/../lib/tune' || fail "tune's RUNPATH is not \$ORIGIN/../lib/tune"
if readelf -d "$tune" "$prefix"/lib/tune/*.so | grep -F -q "$build"; then
  fail "an installed file's RUNPATH names the build tree"
fi

[ "$("$tune" python-path)" = "$prefix/share/tune/python" ] || fail "tune python-path: $("$tune" python-path)"
PYTHONPATH="$("$tune" python-path)" /usr/bin/python3 -c 'import tune_trial; assert not tune_trial.in_trial()'

if command -v man > /dev/null; then
  man -l "$prefix/share/man/man1/tune.1" 2>/dev/null | head -n 6 > "$work/man.txt" || true
  grep -q "tune - hyperparameter studies" "$work/man.txt" || fail "man -l tune.1: $(cat "$work/man.txt")"
else  # no man-db: the page's source
  grep -q '^tune \\- hyperparameter studies' "$prefix/share/man/man1/tune.1" || fail "tune.1 has no NAME line"
  echo "man is not installed: tune.1's NAME line checked in its source"
fi
bash -c "source '$prefix/share/bash-completion/completions/tune'
COMP_WORDS=(tune trials --st); COMP_CWORD=2; _tune; [ \"\${COMPREPLY[*]}\" = '--study --study-name --storage --state' ]" ||
  fail "the bash completion does not complete 'tune trials --st'"
for f in README.md LICENSE docs/config.md; do
  [ -f "$prefix/share/doc/tune/$f" ] || fail "share/doc/tune/$f is missing"
done

if [ ! -f "$prefix/lib/tune/libtune_torch.so" ]; then
  echo "SKIP the train study: this build has no LibTorch trainer"
  exit 0
fi
# A train study from /: a SentencePiece checkpoint (DeBERTa-v3's spm.model) when the test
# checkpoints can be written (python3-torch, python3-sentencepiece), else a model from scratch.
model='"tiny-bert"'; init=', "init": "scratch"'
if /usr/bin/python3 -c 'import torch, sentencepiece' 2>/dev/null &&
   /usr/bin/python3 "$src/tests/scripts/make_checkpoints.py" "$work" > "$work/checkpoints.log" 2>&1 &&
   [ -f "$work"/hub/models--tiny-org--deberta-spm/snapshots/*/spm.model ]; then
  model='"tiny-org/deberta-spm"'; init=""
  export HF_HUB_CACHE="$work/hub"
else
  /usr/bin/python3 - "$work" <<'PY'
import json, os, sys
for split, n in (("train", 64), ("validation", 32)):
    with open(os.path.join(sys.argv[1], split + ".jsonl"), "w") as f:
        for i in range(n):
            f.write(json.dumps({"text": ["rain and cloud", "goal and match"][i % 2] + f" {i}",
                                "label": ["neg", "pos"][i % 2]}) + "\n")
PY
fi
cat > "$work/study.json" <<JSON
{"direction": "maximize", "n_trials": 1, "sampler": {"name": "random", "seed": 1},
 "search_space": {"model": {"type": "model", "choices": [$model]},
                  "learning_rate": [0.003]},
 "objective": {"type": "train"$init,
               "data": {"train": "train.jsonl", "validation": "validation.jsonl",
                        "labels": ["neg", "pos"]},
               "epochs": 1, "batch_size": 16, "max_length": 32, "threads": 1}}
JSON
LD_DEBUG=files LD_DEBUG_OUTPUT="$work/ld" "$tune" --study s --config "$work/study.json" \
  --storage "sqlite:///$work/s.db" > "$work/study.out" 2> "$work/study.err" ||
  { cat "$work/study.err" >&2; fail "the installed tune's study failed"; }
"$tune" trials --study s --storage "sqlite:///$work/s.db" --format json > "$work/trials.json"
/usr/bin/python3 -c "import json,sys; t=json.load(open(sys.argv[1])); assert t[0]['state']=='COMPLETE', t" "$work/trials.json" ||
  fail "the trial did not complete"
# The libraries opened by path (the plugins), resolved.
loaded=$(cat "$work"/ld.* | grep -o 'file=/[^ ]*libtune_[a-z]*\.so' | sed 's/^file=//' |
         xargs -r realpath | sort -u)
echo "$loaded"
grep -qx "$prefix/lib/tune/libtune_torch.so" <<< "$loaded" || fail "libtune_torch.so was not the installed one"
if [ "$model" = '"tiny-org/deberta-spm"' ]; then
  grep -qx "$prefix/lib/tune/libtune_spm.so" <<< "$loaded" || fail "libtune_spm.so was not the installed one"
  echo "train study from /: $model with its SentencePiece tokenizer: COMPLETE"
else
  echo "train study from /: tiny-bert from scratch: COMPLETE (no SentencePiece checkpoint:" \
       "python3-torch or python3-sentencepiece missing)"
fi
if grep -F "$build" <<< "$loaded"; then fail "a library was loaded from the build tree"; fi

if [ "$package" = --package ] && ! command -v dpkg-shlibdeps > /dev/null; then
  echo "SKIP the package: dpkg-shlibdeps is missing (dpkg-dev; scripts/install-deps.sh installs it)"
elif [ "$package" = --package ]; then
  cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/deb" > "$work/cpack.log" 2>&1 ||
    { cat "$work/cpack.log" >&2; fail "cpack -G DEB failed"; }
  deb=$(ls "$work"/deb/tune_*.deb)
  dpkg-deb -I "$deb" | tee "$work/control.txt"
  if readelf -d "$prefix/lib/tune/libtune_torch.so" | grep -q 'R.*PATH.*site-packages/torch/lib'; then
    # Built against a pip torch: no Debian package holds that LibTorch, so none is a dependency;
    # the installed plugin finds the wheel through its RUNPATH.
    echo "LibTorch is a PyPI wheel here: the package's Depends name no libtorch (as expected)"
    if grep -q '^ Depends:.*libtorch' "$work/control.txt"; then
      fail "the package depends on a Debian libtorch, but this build uses a pip torch"
    fi
  else
    grep -q '^ Depends:.*libtorch' "$work/control.txt" || fail "the package does not depend on libtorch"
  fi
  grep -q '^ Depends:.*libjs-chart.js' "$work/control.txt" || fail "the package does not depend on libjs-chart.js"
  dpkg-deb -c "$deb" > "$work/contents.txt"
  grep -q ' ./usr/bin/tune$' "$work/contents.txt" || fail "the package has no /usr/bin/tune"
  grep -q ' ./usr/share/man/man1/tune.1' "$work/contents.txt" || fail "the package has no man page"
  grep -q ' ./usr/lib/tune/libtune_torch.so$' "$work/contents.txt" || fail "the package has no LibTorch plugin"
fi
echo "installed tune: OK"
