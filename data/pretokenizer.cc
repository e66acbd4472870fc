// Pattern parser, compiler to a small backtracking program, and the splitter.
//
// Program := Inst*, run from pc 0 with a stack of (pc, position) alternatives:
//   kSet s       consume one code point in sets_[s], else backtrack
//   kSplit x y   try x; on failure resume at y (x is preferred: greedy / leftmost-first)
//   kJmp x       continue at x
//   kNotAhead p  backtrack if programs_[p] matches here (consumes nothing); kAhead: unless
//   kMatch       success: the match ends at the current position
#include "data/pretokenizer.h"

#include <deque>
#include <limits>
#include <memory>

namespace headlab {
namespace {

constexpr uint8_t kLetter = 1, kNumber = 2, kSpace = 4;
constexpr int kInfinite = std::numeric_limits<int>::max();

struct Node {
  enum Kind { kSetNode, kSeq, kAlt, kRepeat, kLook } kind;
  int32_t set = 0;  // kSetNode
  std::vector<std::unique_ptr<Node>> children;
  int min = 0, max = 0;   // kRepeat
  bool negative = false;  // kLook
};
using NodePtr = std::unique_ptr<Node>;

NodePtr MakeNode(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  return n;
}

// Returns true iff `n` can match the empty string.
bool Nullable(const Node& n) {
  switch (n.kind) {
    case Node::kSetNode:
      return false;
    case Node::kLook:
      return true;
    case Node::kRepeat:
      return n.min == 0 || Nullable(*n.children[0]);
    case Node::kSeq:
      for (const auto& c : n.children)
        if (!Nullable(*c)) return false;
      return true;
    case Node::kAlt:
      for (const auto& c : n.children)
        if (Nullable(*c)) return true;
      return false;
  }
  return false;
}

class Parser {
 public:
  Parser(const std::string& pattern, std::vector<PreTokenizer::CharSet>* sets)
      : p_(pattern), sets_(sets) {
    DecodeUtf8(pattern, &text_);
  }

  StatusOr<NodePtr> Parse() {
    NodePtr n = ParseAlt(false);
    if (!error_.ok()) return error_;
    if (pos_ < text_.cp.size()) return Fail("unbalanced ')'");
    return n;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.cp.size(); }
  uint32_t Peek(size_t k = 0) const { return pos_ + k < text_.cp.size() ? text_.cp[pos_ + k] : 0; }

  Status Fail(const std::string& what) {
    if (error_.ok())
      error_ = Status::InvalidArgument(
          "pre-tokenizer pattern: at offset " +
          std::to_string(pos_ < text_.offset.size() ? text_.offset[pos_] : p_.size()) + ": " +
          what + " (pattern " + p_ + ")");
    return error_;
  }

  int32_t AddSet(PreTokenizer::CharSet s) {
    sets_->push_back(std::move(s));
    return int32_t(sets_->size() - 1);
  }

  NodePtr SetNode(PreTokenizer::CharSet s) {
    NodePtr n = MakeNode(Node::kSetNode);
    n->set = AddSet(std::move(s));
    return n;
  }

  // Adds literal code point c (and its case variants under (?i)) to `s`.
  void AddLiteral(uint32_t c, PreTokenizer::CharSet* s) const {
    if (ci_) {
      for (uint32_t v : CaseVariants(c)) s->ranges.push_back({v, v});
    } else {
      s->ranges.push_back({c, c});
    }
  }

  NodePtr ParseAlt(bool in_group) {
    NodePtr alt = MakeNode(Node::kAlt);
    alt->children.push_back(ParseSeq());
    while (error_.ok() && !AtEnd() && Peek() == '|') {
      ++pos_;
      alt->children.push_back(ParseSeq());
    }
    if (!in_group && !AtEnd() && Peek() == ')') Fail("unbalanced ')'");
    if (alt->children.size() == 1) return std::move(alt->children[0]);
    return alt;
  }

  NodePtr ParseSeq() {
    NodePtr seq = MakeNode(Node::kSeq);
    while (error_.ok() && !AtEnd() && Peek() != '|' && Peek() != ')') {
      NodePtr atom = ParseAtom();
      if (!error_.ok()) break;
      atom = ParseQuantifier(std::move(atom));
      seq->children.push_back(std::move(atom));
    }
    return seq;
  }

  // Reads a decimal integer; -1 if none.
  int ReadInt() {
    int v = -1;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = (v < 0 ? 0 : v * 10) + int(Peek() - '0');
      if (v > 100000) v = 100000;
      ++pos_;
    }
    return v;
  }

  NodePtr ParseQuantifier(NodePtr atom) {
    if (AtEnd()) return atom;
    int min = -1, max = -1;
    const uint32_t c = Peek();
    if (c == '?')
      min = 0, max = 1, ++pos_;
    else if (c == '*')
      min = 0, max = kInfinite, ++pos_;
    else if (c == '+')
      min = 1, max = kInfinite, ++pos_;
    else if (c == '{') {
      ++pos_;
      min = ReadInt();
      max = min;
      if (!AtEnd() && Peek() == ',') {
        ++pos_;
        max = ReadInt();
        if (max < 0) max = kInfinite;
      }
      if (min < 0 || AtEnd() || Peek() != '}' || max < min) {
        Fail("expected a counted repetition {n}, {n,} or {n,m}");
        return atom;
      }
      ++pos_;
    } else {
      return atom;
    }
    if (!AtEnd() && (Peek() == '?' || Peek() == '+')) {
      Fail("lazy and possessive quantifiers are not supported");
      return atom;
    }
    if (max == kInfinite && Nullable(*atom)) {
      Fail("an unbounded repetition of something that can match nothing");
      return atom;
    }
    NodePtr r = MakeNode(Node::kRepeat);
    r->min = min;
    r->max = max;
    r->children.push_back(std::move(atom));
    return r;
  }

  NodePtr ParseAtom() {
    const uint32_t c = Peek();
    if (c == '(') {
      ++pos_;
      bool saved_ci = ci_;
      NodePtr look;
      if (Peek() == '?') {
        if (Peek(1) == ':') {
          pos_ += 2;
        } else if (Peek(1) == 'i' && Peek(2) == ':') {
          pos_ += 3;
          ci_ = true;
        } else if (Peek(1) == '!' || Peek(1) == '=') {
          look = MakeNode(Node::kLook);
          look->negative = Peek(1) == '!';
          pos_ += 2;
        } else {
          Fail("unsupported group syntax (supported: ( ), (?: ), (?i: ), (?! ), (?= ))");
          return MakeNode(Node::kSeq);
        }
      }
      NodePtr body = ParseAlt(true);
      ci_ = saved_ci;
      if (AtEnd() || Peek() != ')') {
        Fail("missing ')'");
        return body;
      }
      ++pos_;
      if (!look) return body;
      look->children.push_back(std::move(body));
      return look;
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      PreTokenizer::CharSet s;
      s.negate = true;
      s.ranges.push_back({'\n', '\n'});
      return SetNode(std::move(s));
    }
    if (c == '^' || c == '$') {
      Fail("anchors are not supported");
      return MakeNode(Node::kSeq);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      Fail("a quantifier with nothing to repeat");
      return MakeNode(Node::kSeq);
    }
    PreTokenizer::CharSet s;
    if (c == '\\') {
      ++pos_;
      ParseEscape(&s);
      return SetNode(std::move(s));
    }
    ++pos_;
    AddLiteral(c, &s);
    return SetNode(std::move(s));
  }

  // After a backslash: adds a class escape's members to *s and returns kInvalidByte, or
  // returns a single-character escape's code point (added to *s too iff add_literal).
  uint32_t ParseEscape(PreTokenizer::CharSet* s, bool add_literal = true) {
    if (AtEnd()) {
      Fail("a trailing backslash");
      return kInvalidByte;
    }
    const uint32_t e = Peek();
    ++pos_;
    switch (e) {
      case 's':
        s->classes |= kSpace;
        return kInvalidByte;
      case 'S':
        s->not_classes |= kSpace;
        return kInvalidByte;
      case 'p':
      case 'P': {
        uint8_t cls = 0;
        if (Peek() == '{' && Peek(2) == '}' && (Peek(1) == 'L' || Peek(1) == 'N')) {
          cls = Peek(1) == 'L' ? kLetter : kNumber;
          pos_ += 3;
        } else if (Peek() == 'L' || Peek() == 'N') {
          cls = Peek() == 'L' ? kLetter : kNumber;
          pos_ += 1;
        } else {
          Fail("only the classes \\p{L} and \\p{N} (and \\P{L}, \\P{N}) are supported");
          return kInvalidByte;
        }
        (e == 'p' ? s->classes : s->not_classes) |= cls;
        return kInvalidByte;
      }
      default:
        break;
    }
    uint32_t lit = e;
    if (e == 'r')
      lit = '\r';
    else if (e == 'n')
      lit = '\n';
    else if (e == 't')
      lit = '\t';
    else if (e == 'f')
      lit = '\f';
    else if (e == 'v')
      lit = '\v';
    if (lit != e) {
      if (add_literal) AddLiteral(lit, s);
      return lit;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
      --pos_;
      Fail(std::string("unsupported escape \\") + char(e));
      return kInvalidByte;
    }
    if (add_literal) AddLiteral(e, s);  // escaped punctuation: itself
    return e;
  }

  NodePtr ParseClass() {
    ++pos_;  // '['
    PreTokenizer::CharSet s;
    if (Peek() == '^') {
      s.negate = true;
      ++pos_;
    }
    bool first = true;
    while (error_.ok()) {
      if (AtEnd()) {
        Fail("missing ']'");
        break;
      }
      uint32_t c = Peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      uint32_t lo;
      if (c == '\\') {
        ++pos_;
        lo = ParseEscape(&s, /*add_literal=*/false);
        if (lo == kInvalidByte) continue;  // a class escape, already added
      } else {
        if (c == '[') {
          Fail("nested classes are not supported");
          break;
        }
        ++pos_;
        lo = c;
      }
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != 0) {
        ++pos_;
        uint32_t hi = Peek();
        if (hi == '\\') {
          ++pos_;
          hi = ParseEscape(&s, /*add_literal=*/false);
          if (hi == kInvalidByte) {
            Fail("a class escape cannot end a range");
            break;
          }
        } else {
          ++pos_;
        }
        if (hi < lo) {
          Fail("a range whose end precedes its start");
          break;
        }
        if (ci_) {
          Fail("ranges inside (?i: ) are not supported");
          break;
        }
        s.ranges.push_back({lo, hi});
      } else {
        AddLiteral(lo, &s);
      }
    }
    return SetNode(std::move(s));
  }

  const std::string& p_;
  std::vector<PreTokenizer::CharSet>* sets_;
  DecodedText text_;
  size_t pos_ = 0;
  bool ci_ = false;
  Status error_;
};

// Emits `n` into programs[prog].
void Emit(const Node& n, int32_t prog, std::vector<PreTokenizer::Program>* programs) {
  using Inst = PreTokenizer::Inst;
  auto here = [&] { return int32_t((*programs)[size_t(prog)].size()); };
  auto push = [&](Inst i) {
    (*programs)[size_t(prog)].push_back(i);
    return here() - 1;
  };
  auto at = [&](int32_t pc) -> Inst& { return (*programs)[size_t(prog)][size_t(pc)]; };
  switch (n.kind) {
    case Node::kSetNode:
      push({PreTokenizer::kSet, n.set, 0});
      return;
    case Node::kSeq:
      for (const auto& c : n.children) Emit(*c, prog, programs);
      return;
    case Node::kAlt: {
      std::vector<int32_t> jumps;
      for (size_t i = 0; i < n.children.size(); ++i) {
        int32_t split = -1;
        if (i + 1 < n.children.size()) split = push({PreTokenizer::kSplit, 0, 0});
        if (split >= 0) at(split).x = here();
        Emit(*n.children[i], prog, programs);
        if (i + 1 < n.children.size()) {
          jumps.push_back(push({PreTokenizer::kJmp, 0, 0}));
          at(split).y = here();
        }
      }
      for (int32_t j : jumps) at(j).x = here();
      return;
    }
    case Node::kRepeat: {
      const Node& body = *n.children[0];
      for (int i = 0; i < n.min; ++i) Emit(body, prog, programs);
      if (n.max == kInfinite) {
        int32_t loop = push({PreTokenizer::kSplit, 0, 0});
        at(loop).x = here();
        Emit(body, prog, programs);
        push({PreTokenizer::kJmp, loop, 0});
        at(loop).y = here();
        return;
      }
      std::vector<int32_t> splits;
      for (int i = n.min; i < n.max; ++i) {
        int32_t s = push({PreTokenizer::kSplit, 0, 0});
        at(s).x = here();
        splits.push_back(s);
        Emit(body, prog, programs);
      }
      for (int32_t s : splits) at(s).y = here();
      return;
    }
    case Node::kLook: {
      int32_t sub = int32_t(programs->size());
      programs->emplace_back();
      Emit(*n.children[0], sub, programs);
      (*programs)[size_t(sub)].push_back({PreTokenizer::kMatch, 0, 0});
      push({n.negative ? PreTokenizer::kNotAhead : PreTokenizer::kAhead, sub, 0});
      return;
    }
  }
}

}  // namespace

void PreTokenizer::CharSet::Finish() {
  for (uint32_t c = 0; c < 256; ++c)
    if (MatchesSlow(c)) latin1[c >> 6] |= uint64_t(1) << (c & 63);
}

bool PreTokenizer::CharSet::MatchesSlow(uint32_t cp) const {
  bool in = false;
  for (const auto& r : ranges)
    if (cp >= r.first && cp <= r.second) {
      in = true;
      break;
    }
  if (!in && (classes | not_classes)) {
    const uint8_t member = (IsLetter(cp) ? kLetter : 0) | (IsNumber(cp) ? kNumber : 0) |
                           (IsWhiteSpace(cp) ? kSpace : 0);
    in = (classes & member) || (not_classes & ~member);
  }
  return in != negate;
}

StatusOr<PreTokenizer> PreTokenizer::Compile(const std::string& pattern) {
  PreTokenizer t;
  t.pattern_ = pattern;
  Parser parser(pattern, &t.sets_);
  StatusOr<NodePtr> root = parser.Parse();
  if (!root.ok()) return root.status();
  for (CharSet& set : t.sets_) set.Finish();
  t.programs_.emplace_back();
  Emit(*root.value(), 0, &t.programs_);
  t.programs_[0].push_back({kMatch, 0, 0});
  return t;
}

int64_t PreTokenizer::MatchAt(int32_t prog, const std::vector<uint32_t>& cp, int64_t start) const {
  const Program& code = programs_[size_t(prog)];
  const int64_t n = int64_t(cp.size());
  // A one-set body (e.g. (?!\S)) needs no stack.
  if (code.size() == 2 && code[0].op == kSet && code[1].op == kMatch)
    return start < n && sets_[size_t(code[0].x)].Matches(cp[size_t(start)]) ? start + 1 : -1;
  // One stack per nesting depth (lookaheads recurse), reused across calls.
  // (A deque: growing it for a deeper level keeps this level's reference valid.)
  thread_local std::deque<std::vector<std::pair<int32_t, int64_t>>> stacks;
  thread_local size_t depth = 0;
  if (stacks.size() <= depth) stacks.resize(depth + 1);
  std::vector<std::pair<int32_t, int64_t>>& stack = stacks[depth];
  stack.clear();
  stack.push_back({0, start});
  struct DepthGuard {
    size_t& d;
    explicit DepthGuard(size_t& x) : d(x) { ++d; }
    ~DepthGuard() { --d; }
  } guard(depth);
  while (!stack.empty()) {
    auto [pc, sp] = stack.back();
    stack.pop_back();
    while (true) {
      const Inst& in = code[size_t(pc)];
      if (in.op == kSet) {
        if (sp >= n || !sets_[size_t(in.x)].Matches(cp[size_t(sp)])) break;
        ++pc;
        ++sp;
      } else if (in.op == kSplit) {
        stack.push_back({in.y, sp});
        pc = in.x;
      } else if (in.op == kJmp) {
        pc = in.x;
      } else if (in.op == kNotAhead || in.op == kAhead) {
        const bool found = MatchAt(in.x, cp, sp) >= 0;  // uses the next depth's stack
        if (found == (in.op == kNotAhead)) break;
        ++pc;
      } else {
        return sp;  // kMatch
      }
    }
  }
  return -1;
}

void PreTokenizer::Split(const DecodedText& text,
                         std::vector<std::pair<uint32_t, uint32_t>>* pieces) const {
  const int64_t n = int64_t(text.cp.size());
  int64_t gap = -1;  // start of pending unmatched code points
  for (int64_t p = 0; p < n;) {
    int64_t end = MatchAt(0, text.cp, p);
    if (end > p) {
      if (gap >= 0) pieces->push_back({text.offset[size_t(gap)], text.offset[size_t(p)]});
      gap = -1;
      pieces->push_back({text.offset[size_t(p)], text.offset[size_t(end)]});
      p = end;
    } else {
      if (gap < 0) gap = p;
      ++p;
    }
  }
  if (gap >= 0) pieces->push_back({text.offset[size_t(gap)], text.offset[size_t(n)]});
}

void PreTokenizer::Split(std::string_view text,
                         std::vector<std::pair<uint32_t, uint32_t>>* pieces) const {
  DecodedText decoded;
  DecodeUtf8(text, &decoded);
  Split(decoded, pieces);
}

}  // namespace headlab
