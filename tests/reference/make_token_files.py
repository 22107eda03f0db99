#!/usr/bin/python3
"""Write tests/reference/fixtures/tokens/: a tiny token-file corpus in nanoGPT's prepared format
(data/*/prepare.py: the token ids of each split as uint16, np.array(ids, dtype=np.uint16).tofile),
train.bin (3000 tokens) and val.bin (600), and meta.json with its vocab_size (300: ids above 255,
as a BPE vocabulary has). The text is a seeded random sequence of 24 fixed "phrases" of 3 to 6
tokens, so that a model can learn it (the token after a phrase's first is known). Run by hand from
the repository root:

    /usr/bin/python3 tests/reference/make_token_files.py

Seeded: a rerun writes the same bytes.
"""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "tokens")
VOCAB = 300


def stream(rng, phrases, n):
    ids = []
    while len(ids) < n:
        ids.extend(phrases[rng.integers(len(phrases))])
    return np.array(ids[:n], dtype=np.uint16)


def main():
    rng = np.random.default_rng(39)
    phrases = [list(rng.integers(0, VOCAB, rng.integers(3, 7))) for _ in range(24)]
    os.makedirs(OUT, exist_ok=True)
    stream(rng, phrases, 3000).tofile(os.path.join(OUT, "train.bin"))
    stream(rng, phrases, 600).tofile(os.path.join(OUT, "val.bin"))
    with open(os.path.join(OUT, "meta.json"), "w") as f:
        json.dump({"vocab_size": VOCAB}, f)
        f.write("\n")
    for name in ("train.bin", "val.bin", "meta.json"):
        print(f"{os.path.join(OUT, name)}: {os.path.getsize(os.path.join(OUT, name))} bytes")


if __name__ == "__main__":
    main()
