#!/usr/bin/python3
"""sp_tokenize.py — JSON Lines of text to JSON Lines of SentencePiece ids.

lf-shard is C and SentencePiece is a C++ library, so a SentencePiece model
reaches a dataset through this pipe rather than through a --tokenizer flag:

    tools/lf-shard/sp_tokenize.py --model m.model --text-field text a.jsonl b.jsonl.gz |
        lf-shard create tokens --in - --out /data/d

Each non-blank input line is a JSON object; its text field is encoded with
the model (Debian's python3-sentencepiece, the same library every
SentencePiece user encodes with, so the ids are those training would see)
and written as {"tokens": [...]} in the same order, so lf-shard's samples
are the input's lines. Inputs are files (plain or .gz; pipe .zst through
`zstd -dc`) or - for stdin. A bad line stops it with FILE:LINE on stderr and
exit status 1; so that lf-shard does not take the lines before it for the
whole corpus, it last writes a line without "tokens", which makes lf-shard
fail too and leave no dataset. --add-bos / --add-eos put the model's own
BOS / EOS ids around each document.
"""
import argparse
import gzip
import json
import sys

BATCH = 1024  # lines encoded in one call: the library's loop, not Python's


def lines(paths):
    """(path, line number, text) of every non-blank line, in order."""
    for path in paths:
        if path == "-":
            f = sys.stdin.buffer
        else:
            f = open(path, "rb")
            if f.peek(2)[:2] == b"\x1f\x8b":
                f = gzip.open(f)
        with f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    yield path, n, line


def stop(message):
    """Ends the output with a line lf-shard refuses, then exits 1."""
    sys.stdout.write('{"sp_tokenize_failed": %s}\n' % json.dumps(message))
    sys.stdout.flush()
    sys.exit("sp_tokenize: " + message)


def texts(paths, field):
    for path, n, line in lines(paths):
        try:
            text = json.loads(line)[field]
        except (ValueError, TypeError, KeyError) as e:
            stop("%s:%d: no string field '%s' in a JSON object (%s)"
                 % (path, n, field, e.__class__.__name__))
        if not isinstance(text, str):
            stop("%s:%d: '%s' is not a string" % (path, n, field))
        yield text


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="SentencePiece .model file")
    p.add_argument("--text-field", default="text", help="JSON key of the text (default text)")
    p.add_argument("--add-bos", action="store_true", help="put the model's BOS id first")
    p.add_argument("--add-eos", action="store_true", help="put the model's EOS id last")
    p.add_argument("inputs", nargs="*", default=["-"], help="JSONL files, or - (default)")
    a = p.parse_args()
    try:
        import sentencepiece
    except ImportError:
        sys.exit("sp_tokenize: needs SentencePiece's Python module "
                 "(apt install python3-sentencepiece, or pip install sentencepiece)")
    sp = sentencepiece.SentencePieceProcessor(model_file=a.model)
    out = sys.stdout
    batch = []

    def flush():
        for ids in sp.encode(batch, out_type=int, add_bos=a.add_bos, add_eos=a.add_eos):
            out.write('{"tokens": [%s]}\n' % ",".join(map(str, ids)))
        batch.clear()

    for text in texts(a.inputs, a.text_field):
        batch.append(text)
        if len(batch) == BATCH:
            flush()
    flush()


if __name__ == "__main__":
    main()
