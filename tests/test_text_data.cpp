// Text corpus: the character and byte tokenizers, the refusals (empty, binary, too short), the
// 90/10 split, and the batches of windows (targets one token on, seeded, resumable, in their split).
#include <doctest/doctest.h>

#include <set>

#include "data/text.hpp"
#include "test_support.hpp"

using namespace headgrad;
using namespace headgrad::data;
using test_support::contains;
using test_support::error_of;

namespace {

using test_support::TempDir; // named after this file

// A text long enough for context 8 (the validation tenth holds 30 characters).
std::string sample_text() { return test_support::repeated("the cat sat on a mat. ", 30); }

} // namespace

TEST_CASE("Tokenizer chars: the text's characters sorted by code point, round trip") {
  const Tokenizer t = Tokenizer::chars_of("hello, wörld\n");
  CHECK(t.kind() == TokenizerKind::chars);
  CHECK(t.size() == 11); // \n space , d e h l o r w ö
  CHECK(t.vocabulary() == "\n ,dehlorwö");
  const auto ids = t.encode("löwe\n");
  REQUIRE(ids.size() == 5); // 5 characters, 6 bytes
  CHECK(ids[0] == 6);       // 'l' is the 7th symbol
  CHECK(ids[1] == 10);      // 'ö' sorts last
  CHECK(t.decode(ids) == "löwe\n");
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)t.encode("cat"); }), "'c' (U+0063) is not in the model's"));
  // the vocabulary a checkpoint stores gives back the same tokenizer
  const Tokenizer back = Tokenizer::from_vocabulary(TokenizerKind::chars, t.vocabulary());
  CHECK(back.encode("löwe\n") == ids);
  CHECK_THROWS_AS((void)Tokenizer::from_vocabulary(TokenizerKind::chars, "ba"), std::invalid_argument); // not sorted
  CHECK_THROWS_AS((void)t.decode(11), std::out_of_range);
}

TEST_CASE("Tokenizer chars refuses invalid UTF-8 naming the offset") {
  const std::string bad = std::string("ab") + "\xC3\x28" + "c"; // 0xC3 must be followed by a continuation byte
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)Tokenizer::chars_of(bad); }), "invalid byte 0xc3 at offset 2"));
  for (const std::string& overlong : {std::string("\xC0\xAF"), std::string("\xED\xA0\x80"), std::string("\xF4\x90\x80\x80")})
    CHECK_THROWS_AS((void)Tokenizer::chars_of(overlong), std::invalid_argument); // overlong, surrogate, > U+10FFFF
}

TEST_CASE("Tokenizer bytes: 256 tokens, any bytes, printed whole through Utf8Stream") {
  const Tokenizer t = Tokenizer::bytes();
  CHECK(t.size() == 256);
  CHECK(t.vocabulary().empty());
  const std::string text = "naïve 😀\xFF";
  const auto ids = t.encode(text);
  CHECK(ids.size() == text.size());
  CHECK(ids[2] == 0xC3);
  CHECK(t.decode(ids) == text);
  // streamed one byte at a time, a character comes out when its last byte does
  Utf8Stream s;
  std::string out, after_first_emoji_byte;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    out += s.push(t.decode(ids[i]));
    if (i == 7) after_first_emoji_byte = out; // "naïve " and the first byte of the 4-byte emoji
  }
  out += s.flush();
  CHECK(after_first_emoji_byte == "naïve ");
  CHECK(out == "naïve 😀\xEF\xBF\xBD"); // the stray 0xFF as U+FFFD
  Utf8Stream cut;
  CHECK(cut.push("a\xF0\x9F") == "a");
  CHECK(cut.flush() == "\xEF\xBF\xBD"); // an unfinished character at the end
}

TEST_CASE("text corpus: refuses a missing, empty, binary or too short file with one line") {
  TempDir dir;
  auto refusal = [&](const std::string& bytes, TokenizerKind kind, std::int64_t context) {
    test_support::write_file(dir / "t.txt", bytes);
    return error_of<std::invalid_argument>([&] { (void)load_text_corpus(dir / "t.txt", kind, context); });
  };
  const std::string missing =
      error_of<std::invalid_argument>([&] { (void)load_text_corpus(dir / "none.txt", TokenizerKind::chars, 8); });
  CHECK(contains(missing, "none.txt: cannot read"));
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)load_text_corpus(dir.path.string(), TokenizerKind::chars, 8); }),
                 "is a directory"));
  CHECK(contains(refusal("", TokenizerKind::chars, 8), "t.txt is empty"));
  CHECK(contains(refusal(sample_text() + std::string(1, '\0'), TokenizerKind::chars, 8), "looks binary (a NUL byte at offset 660)"));
  CHECK(contains(refusal("abc\xFF" + sample_text(), TokenizerKind::chars, 8), "is not UTF-8 text (invalid byte 0xff at offset 3)"));
  const std::string short_msg = refusal("0123456789012345678", TokenizerKind::chars, 8);
  CHECK(contains(short_msg, "is too short: 19 characters for --context 8"));
  CHECK(contains(short_msg, "needs 9 tokens"));
  for (const std::string& m : {missing, short_msg}) CHECK(m.find('\n') == std::string::npos);
  // bytes read what chars refuses
  const TextCorpus c = text_corpus_of("abc\xFF" + sample_text(), TokenizerKind::bytes, 8, "latin-1");
  CHECK(c.tokens[3] == 0xFF);
}

// Fault 12: the byte tokenizer reads any input, NUL bytes included (its tokens are the bytes:
// 0..255, a NUL is token 0); the character tokenizer still takes a NUL for a binary file, naming
// --tokenizer bytes.
TEST_CASE("text corpus: fault 12: --tokenizer bytes reads NUL bytes, chars refuses them naming bytes") {
  TempDir dir;
  const std::string text = sample_text() + std::string(1, '\0') + "after the NUL" + std::string(3, '\0');
  test_support::write_file(dir / "nul.bin", text);
  const TextCorpus c = load_text_corpus(dir / "nul.bin", TokenizerKind::bytes, 8);
  REQUIRE(c.tokens.size() == static_cast<std::int64_t>(text.size()));
  CHECK(c.tokens[static_cast<std::int64_t>(sample_text().size())] == 0);
  CHECK(c.tokenizer.decode(c.tokens.slice(0, c.tokens.size())) == text);
  const std::string chars = error_of<std::invalid_argument>(
      [&] { (void)load_text_corpus(dir / "nul.bin", TokenizerKind::chars, 8); });
  CHECK(contains(chars, fmt::format("a NUL byte at offset {}", sample_text().size())));
  CHECK(contains(chars, "--tokenizer bytes"));
}

TEST_CASE("text corpus: the last 10 percent validates and the fingerprint names the text") {
  const TextCorpus c = text_corpus_of(sample_text(), TokenizerKind::chars, 8, "cats");
  CHECK(c.tokens.size() == 660);
  CHECK(c.train_tokens == 594);
  CHECK(c.validation_tokens() == 66);
  CHECK(c.fingerprint == fnv1a64(sample_text()));
  CHECK(fnv1a64("") == 0xcbf29ce484222325ull); // FNV-1a's offset basis
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull); // the published test vector
  CHECK(text_corpus_of(sample_text() + "!", TokenizerKind::chars, 8, "x").fingerprint != c.fingerprint);
}

TEST_CASE("text batches: windows and their next tokens, seeded, inside their split") {
  const TextCorpus c = text_corpus_of(sample_text(), TokenizerKind::chars, 8, "cats");
  const Batch b = make_text_batch(c, 8, /*seed=*/5, /*index=*/3, /*batch_size=*/6);
  CHECK(b.tokens.shape() == Dims{6, 8});
  CHECK(b.targets.shape() == Dims{6, 8});
  CHECK(b.valid_tokens == 48);
  CHECK(b.valid_lens.to_int_vector() == std::vector<std::int64_t>(6, 8));
  const auto offsets = text_batch_offsets(c, 8, 5, 3, 6);
  const auto x = b.tokens.to_int_vector(), y = b.targets.to_int_vector();
  for (std::size_t r = 0; r < 6; ++r) {
    const std::int64_t o = offsets[r];
    CHECK(o >= 0);
    CHECK(o + 8 < c.train_tokens); // the window and its last target lie in the training split
    for (std::size_t t = 0; t < 8; ++t) {
      CHECK(x[r * 8 + t] == c.tokens[static_cast<std::size_t>(o) + t]);
      CHECK(y[r * 8 + t] == c.tokens[static_cast<std::size_t>(o) + t + 1]);
    }
  }
  // a pure function of (seed, index): again the same, another index or seed differs
  CHECK(make_text_batch(c, 8, 5, 3, 6).tokens.to_int_vector() == x);
  CHECK(text_batch_offsets(c, 8, 5, 4, 6) != offsets);
  CHECK(text_batch_offsets(c, 8, 6, 3, 6) != offsets);
  // the offsets cover the split: over many batches every start appears, none beyond
  std::set<std::int64_t> seen;
  for (std::uint64_t i = 0; i < 1000; ++i)
    for (std::int64_t o : text_batch_offsets(c, 8, 1, i, 12)) seen.insert(o);
  CHECK(*seen.begin() == 0);
  CHECK(*seen.rbegin() == c.train_tokens - 9);
  CHECK(static_cast<std::int64_t>(seen.size()) == c.train_tokens - 8);
}

TEST_CASE("text eval set: windows of the validation split, a prefix of a bigger set") {
  const TextCorpus c = text_corpus_of(sample_text(), TokenizerKind::chars, 8, "cats");
  const auto small = text_eval_offsets(c, 8, 5), big = text_eval_offsets(c, 8, 50);
  CHECK(std::equal(small.begin(), small.end(), big.begin()));
  for (std::int64_t o : big) {
    CHECK(o >= c.train_tokens);
    CHECK(o + 8 < static_cast<std::int64_t>(c.tokens.size()));
  }
  CHECK(make_text_eval_set(c, 8, 5).tokens.shape() == Dims{5, 8});
  CHECK_THROWS_AS((void)make_text_eval_set(c, 66, 5), std::invalid_argument); // longer than the split
}

TEST_CASE("text corpus: the default corpus is Debian's fortunes") {
  // ./dev.sh deps installs the fortunes package (the default corpus of headgrad train --task text)
  const TextCorpus c = load_text_corpus("", TokenizerKind::chars, 64);
  CHECK(c.source == kDefaultCorpusDir);
  CHECK(c.tokens.size() > 2'000'000);
  CHECK(c.tokenizer.size() > 90);   // letters, digits, punctuation, a few accented characters
  CHECK(c.tokenizer.size() < 200);
  CHECK(contains(c.tokenizer.decode(c.tokens.slice(0, 200)), " "));
}

TEST_CASE("text corpus from a file read in 1 MB pieces: a character across a piece's end, the narrowest tokens") {
  TempDir dir;
  // "é" (2 bytes) at bytes 2^20 - 1 and 2^20: split between the first two pieces; "€" (3 bytes) and
  // "😀" (4 bytes) across the second piece's end
  std::string text(std::size_t{1} << 20, 'a');
  text.back() = 'b';
  text.replace(text.size() - 1, 1, "\xC3\xA9");
  text += std::string((std::size_t{1} << 20) - 3, 'c') + "\xE2\x82\xAC" + "\xF0\x9F\x98\x80" + sample_text();
  test_support::write_file(dir / "t.txt", text);
  const TextCorpus file = load_text_corpus(dir / "t.txt", TokenizerKind::chars, 8);
  const TextCorpus mem = text_corpus_of(text, TokenizerKind::chars, 8, "mem");
  CHECK(file.fingerprint == fnv1a64(text));
  CHECK(file.tokenizer.vocabulary() == mem.tokenizer.vocabulary());
  REQUIRE(file.tokens.size() == mem.tokens.size());
  CHECK(file.tokens.slice(0, file.tokens.size()) == mem.tokens.slice(0, mem.tokens.size()));
  CHECK(file.tokenizer.decode(file.tokens.slice(0, file.tokens.size())) == text);
  CHECK(file.tokens.width() == 1); // fewer than 256 characters: one byte a token
  CHECK(file.tokens.bytes() == static_cast<std::uint64_t>(file.tokens.size()));
  // offsets in messages count from the start of the file, across pieces
  std::string bad = std::string((std::size_t{1} << 20) + 5, 'x') + "\xFF" + sample_text();
  test_support::write_file(dir / "bad.txt", bad);
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)load_text_corpus(dir / "bad.txt", TokenizerKind::chars, 8); }),
                 fmt::format("invalid byte 0xff at offset {}", (1 << 20) + 5)));
  bad[(std::size_t{1} << 20) + 9] = '\0';
  test_support::write_file(dir / "bad.txt", bad);
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)load_text_corpus(dir / "bad.txt", TokenizerKind::chars, 8); }),
                 fmt::format("a NUL byte at offset {}", (1 << 20) + 9)));
  // a character cut short at the very end
  test_support::write_file(dir / "cut.txt", sample_text() + "\xE2\x82");
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)load_text_corpus(dir / "cut.txt", TokenizerKind::chars, 8); }),
                 fmt::format("invalid byte 0xe2 at offset {}", sample_text().size())));
}

TEST_CASE("TokenSequence: one byte for up to 256 tokens, two up to 65536, four beyond, every value kept") {
  CHECK(TokenSequence::width_for(2) == 1);
  CHECK(TokenSequence::width_for(256) == 1);
  CHECK(TokenSequence::width_for(257) == 2);
  CHECK(TokenSequence::width_for(65536) == 2);
  CHECK(TokenSequence::width_for(65537) == 4);
  for (std::int64_t vocab : {std::int64_t{256}, std::int64_t{65536}, std::int64_t{1} << 20}) {
    CAPTURE(vocab);
    TokenSequence t(5, vocab);
    const std::vector<std::int64_t> values = {0, 1, vocab / 2, vocab - 2, vocab - 1};
    for (std::int64_t i = 0; i < 5; ++i) t.set(i, values[static_cast<std::size_t>(i)]);
    CHECK(t.slice(0, 5) == values);
    CHECK(t[4] == vocab - 1);
    CHECK(t.bytes() == static_cast<std::uint64_t>(5 * TokenSequence::width_for(vocab)));
  }
  // a text of more than 256 characters takes two bytes a token, and decodes back
  std::string text = sample_text();
  for (char32_t cp = 0x400; cp < 0x400 + 300; ++cp)
    text += std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
  const TextCorpus c = text_corpus_of(text, TokenizerKind::chars, 8, "wide");
  CHECK(c.tokens.width() == 2);
  CHECK(c.tokenizer.decode(c.tokens.slice(0, c.tokens.size())) == text);
}
