#!/bin/sh
# Regenerates the bundled reference voices in examples/voices/ with flite + sox
# (Debian: apt-get install flite sox). flite speaks at 16 kHz; sox resamples to
# 24 kHz mono 16-bit PCM (-D: no dither, so reruns are byte-identical), trims
# the silence at both ends and pads 0.15 s back.
# omnidub/data/alice-3s.wav (the bench's pre-cut reference) is the first 3.04 s
# of alice.wav (cut in the pause after "early.", 8 ms fade-out); recut it if
# alice.wav changes.
# The sentences must stay identical to the `text` fields in examples/voices.toml.
# Usage: sh examples/make_voices.sh   (from anywhere)
set -eu
cd "$(dirname "$0")/voices"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

make_voice() { # name flite-voice text
    flite -voice "$2" -t "$3" -o "$tmp/$1.wav"
    sox -D "$tmp/$1.wav" -r 24000 -c 1 -b 16 "$1.wav" \
        silence 1 0.01 0.5% reverse silence 1 0.01 0.5% reverse \
        pad 0.15 0.15 gain -n -1
}

make_voice alice slt "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today."
make_voice bob rms "Well, I think we should leave on Friday. The weather looks better then, and the roads will be quiet."
