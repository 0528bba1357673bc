// Streamed tool calls (answers/tool_stream.h) against the whole answer (read_answer): fixed answers of every format
// (Hermes, Llama 3 JSON, Mistral, DeepSeek-V3 / V3.1, Kimi-K2, pythonic) fed in every two-piece split,
// every three-piece split of the shorter ones and random chunkings; the content deltas concatenate to the whole
// answer's content, each call is announced once, in order, with the whole answer's name (and Kimi's own id), and its
// argument fragments concatenate to the whole answer's arguments byte for byte; fed a byte at a time, every
// argument byte goes out before the choice ends. Where the whole answer rules out a call already announced, what a
// client joins from the deltas is the whole answer's calls among that stale one, never a call the answer does not
// make, and the finish_reason is the whole answer's.
#include "answers/tool_stream.h"

#include <gtest/gtest.h>

#include "answers/tool_format_sections.h"
#include "engine/json_sequence.h"
#include "loader/json.h"
#include "testing/stream_split_testing.h"
#include "testing/tool_request_testing.h"

#include <algorithm>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace attnzoo::answers {
namespace {

struct Streamed {
  std::string content;
  std::vector<std::string> names, arguments, ids;
  std::string problem;  // the first broken rule of the delta shapes, if any
  size_t arguments_before_finish = 0;  // argument bytes sent before the choice ended
  bool called = false;  // after finish: "tool_calls" for a finished choice
};

Streamed run(ToolFormat format, ToolMode mode, bool parallel, const std::vector<std::string>& pieces,
             const std::string& forced_name = {}) {
  ToolCallStream s(format, mode, parallel, forced_name);
  Streamed out;
  const auto take = [&](const ToolStreamStep& step) {
    out.content += step.content;
    for (const ToolCallDelta& d : step.calls) {
      if (d.first) {
        if (d.index != out.names.size()) out.problem = "call " + std::to_string(d.index) + " announced out of order";
        if (d.name.empty() || d.id.empty()) out.problem = "a first delta without name or id";
        out.names.push_back(d.name);
        out.ids.push_back(d.id);
        out.arguments.push_back(d.arguments);
      } else {
        if (d.index >= out.names.size()) out.problem = "arguments before the call's first delta";
        else if (d.arguments.empty()) out.problem = "an empty arguments delta";
        else out.arguments[d.index] += d.arguments;
      }
    }
  };
  for (const std::string& p : pieces) take(s.push(p));
  for (const std::string& a : out.arguments) out.arguments_before_finish += a.size();
  take(s.finish());
  out.called = s.called();
  return out;
}

// The text the forced stream reads (forced answers) or the answer itself.
ParsedAnswer whole(ToolFormat format, ToolMode mode, bool parallel, const std::string& text,
                   const std::string& forced_name = {}) {
  return read_answer(text, mode, parallel, format, forced_name);
}

// A call as a client has it once it joined the deltas: name(arguments), and Kimi-K2's own id (functions.NAME:IDX).
std::string shown(const std::string& name, const std::string& arguments, const std::string& id, bool own_ids) {
  return name + "(" + arguments + ")" + (own_ids ? " " + id : "");
}

// `stale`: the calls announced before the text that rules them out (a stream cannot take a delta back), shown, as far
// as they went out. The calls a client joined by index are the whole answer's, whole and in order, and these, each
// once; nothing else (no stale call continued by another's arguments, no call of the answer left unsent).
void expect_same(const ParsedAnswer& w, const Streamed& s, const std::string& what,
                 const std::vector<std::string>& stale = {}, bool own_ids = false) {
  EXPECT_EQ(s.problem, "") << what;
  EXPECT_EQ(s.content, w.content) << what;
  EXPECT_EQ(s.called, !w.calls.empty()) << what;  // the whole answer's finish_reason
  size_t whole = 0, gone = 0;
  for (size_t i = 0; i < s.names.size(); ++i) {
    const std::string got = shown(s.names[i], s.arguments[i], s.ids[i], own_ids);
    if (whole < w.calls.size() &&
        got == shown(w.calls[whole].name, w.calls[whole].arguments, w.calls[whole].id, own_ids))
      ++whole;
    else if (gone < stale.size() && got == stale[gone])
      ++gone;
    else
      ADD_FAILURE() << what << ": index " << i << " joins to " << got << ", not a call of the answer";
  }
  EXPECT_EQ(whole, w.calls.size()) << what << ": calls of the answer not sent";
  EXPECT_EQ(gone, stale.size()) << what << ": stale calls expected";
}

struct Case {
  ToolFormat format;
  ToolMode mode;
  std::string text;
  size_t calls;  // how many the whole answer has (so a case cannot silently stop being one)
  bool parallel = true;
  // Calls announced before the text that rules them out, as a client joins them (expect_same).
  std::vector<std::string> stale = {};
  std::string forced_name = {};  // the formats that name the function outside the JSON
};

const std::string kB = std::string(kDeepSeekCallsBegin), kE = std::string(kDeepSeekCallsEnd),
                  kCB = std::string(kDeepSeekCallBegin), kCE = std::string(kDeepSeekCallEnd),
                  kSep = std::string(kDeepSeekSep), kKB = std::string(kKimiSectionBegin),
                  kKE = std::string(kKimiSectionEnd), kKCB = std::string(kKimiCallBegin),
                  kKA = std::string(kKimiArgumentBegin), kKCE = std::string(kKimiCallEnd);

std::string v3_call(const std::string& name, const std::string& json, bool closed = true) {
  return kCB + "function" + kSep + name + "\n```json\n" + json + (closed ? "\n```" + kCE : "");
}
std::string v31_call(const std::string& name, const std::string& json) { return kCB + name + kSep + json + kCE; }
std::string kimi_call(const std::string& id, const std::string& json) { return kKCB + id + kKA + json + kKCE; }

std::vector<Case> cases() {
  const ToolFormat H = ToolFormat::hermes, L = ToolFormat::llama3_json, M = ToolFormat::mistral,
                   D3 = ToolFormat::deepseek_v3, D31 = ToolFormat::deepseek_v31, K = ToolFormat::kimi_k2,
                   P = ToolFormat::pythonic;
  const ToolMode A = ToolMode::automatic, F = ToolMode::forced;
  return {
      {H, A,
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris \\\"</tool\\\" {x}\", "
       "\"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n"
       "</tool_call>",
       2},
      {H, A, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", 1},
      {H, A, "<tool_call>{\"name\": \"f\"}</tool_call>", 1},
      {H, A, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": null}]}}\n", 1},
      {H, A, "<tool_call>{\"arguments\": {\"x\": \"y\"}, \"name\": \"g\"}</tool_call>", 1},
      {H, A, "Voil\xc3\xa0 <tool_call>{\"name\": \"f\", \"arguments\": {\"q\": \"na\xc3\xafve \xe2\x98\x83\"}}</tool_call>", 1},
      {H, A, "A<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call> B <tool_call>{\"name\":\"g\",\"arguments\":{}}</tool_call>",
       2},
      {H, A, "<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1}}</tool_call><tool_call>{\"name\":\"g\",\"arguments\":{}}</tool_call>",
       1, false},
      {H, A, "no calls here, only a < and a <tool", 0},
      // A block without a name settles unannounced: nothing after it streams (the whole answer is content).
      {H, A, "<tool_call>{\"arguments\": {}}</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {\"a\": 1}}</tool_call>",
       0},
      {H, A, "<tool_call> </tool_call><tool_call>{\"name\": \"g\"}</tool_call>", 0},
      {L, A, "{\"name\": \"f\", \"parameters\": {\"a\": \"};{\"}}; {\"name\": \"g\", \"arguments\": {}}", 2},
      {L, A, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": 1.5e3}}", 1},
      {L, A, " plain text {\"name\": \"f\"}", 0},
      {L, A, "{\"name\": \"f\", \"parameters\": {}} and text", 0, true, {"f({})"}},
      {M, A,
       "Let me look.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
       "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}]",
       2},
      {M, A, "[TOOL_CALLS] {\"name\": \"f\", \"arguments\": {\"a\": \"[x]\"}}", 1},
      {M, A, "[TOOL_CALLS]f[ARGS]{\"a\": 1}[TOOL_CALLS]g[CALL_ID]abc123def[ARGS] {\"b\": [2]}", 2},
      {M, A, "Just text with a [TOOL", 0},
      {M, A, "[TOOL_CALLS]f[ARGS]\"{\\\"a\\\": 1}\"[TOOL_CALLS]g[ARGS]null[TOOL_CALLS]h[ARGS] {\"s\": \"[ARGS]\"}", 3},
      {H, F, "{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>",
       2},
      {H, F, "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", 1},
      {M, F, "{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]", 2},
      {M, F, "{\"name\": \"f\", \"arguments\": {}}", 1},
      {L, F, "{\"name\": \"f\", \"parameters\": {\"a\": 1}}; {\"name\": \"g\", \"parameters\": {}}", 2},
      // The sections: content, then calls whose heads name them; a block whose head is broken is content and takes
      // no index; a call the model never closed counts once its object is whole.
      {D3, A, "Let me check." + kB + v3_call("get_weather", "{\"city\": \"Paris <\xef\xbd\x9c tool {x}\", \"days\": 2}") + "\n" +
           v3_call("get_time", "{}") + kE,
       2},
      {D3, A, "x" + kB + v3_call("f", "{\"a\": [1, {\"b\": null}]}", false), 1},
      {D3, A, kB + kCB + "function" + kSep + "f\n```python\n{}\n```" + kCE + v3_call("g", "{\"b\": 2}") + kE, 1},
      {D31, A, "Hi " + kB + v31_call("f", "{\"a\": [1, {\"b\": null}]}") + v31_call("g", " {} ") + kE, 2},
      {D31, A, kB + v31_call("bad name", "{}") + v31_call("g", "{\"b\": \"<\"}") + kE + " \n", 1},
      // Announced, then broken: f stays as far as it went out; g is not its continuation but a call of its own.
      {D31, A, kB + v31_call("f", "{\"a\": }") + v31_call("g", "{}") + kE, 1, true, {"f({\"a\": })"}},
      {D31, A, kB + v31_call("f", "{") + v31_call("g", "{}") + v31_call("h", "{\"b\": 2}") + kE, 2, true, {"f({)"}},
      {D31, A, kB + v31_call("f", "{\"a\": 1}") + v31_call("g", "{}") + kE, 1, false},
      {D31, A, "just text and a " + kB.substr(0, 7), 0},
      {K, A, "Sure. " + kKB + kimi_call("functions.get_weather:0", "{\"city\": \"Oslo\"}") +
           kimi_call("functions.get_time:1", "{}") + kKE,
       2},
      {K, A, kKB + kKCB + "functions.f:0" + kKA + " {\"q\": \"na\xc3\xafve\"}", 1},
      {K, A, kKB + kimi_call("functions.f:x", "{}") + kimi_call("functions.g:1", "{\"a\": 1}") + kKE + "tail", 1},
      // Kimi's id announced once whole (a space or the argument marker follows it); a head that breaks after that
      // (no argument marker, arguments that are not an object, text before the marker) was announced: it stays, as
      // it went out (no arguments), and the calls after it go out at new indices.
      {K, A, kKB + kKCB + " functions.get_time:12 \n" + kKA + "\n{}" + kKCE + kimi_call("functions.f:13", "{\"a\": 1}"), 2},
      {K, A, kKB + kimi_call("functions.f:0", "[1]") + kimi_call("functions.g:1", "{}") + kKE, 1, true,
       {"f() functions.f:0"}},
      {K, A, kKB + kimi_call("functions.f:0", "[1]") + kimi_call("functions.g:1", "{}") + kKE, 1, false,
       {"f() functions.f:0"}},
      {K, A, kKB + kimi_call("functions.f:0", "[1]") + kimi_call("functions.f:1", "{}") + kKE, 1, true,
       {"f() functions.f:0"}},
      {K, A, kKB + kimi_call("functions.f:0", "{\"a\": 1}") + kimi_call("functions.g:1", "[1]") +
           kimi_call("functions.h:2", "{}") + kKE, 2, true, {"g() functions.g:1"}},
      {K, A, kKB + kKCB + "functions.f:0" + kKCE + kimi_call("functions.g:1", "{}") + kKE, 1},  // (never announced)
      {K, A, kKB + kKCB + "functions.f:0 " + kKCE + kimi_call("functions.g:1", "{}") + kKE, 1, true,
       {"f() functions.f:0"}},
      {K, A, kKB + kimi_call("functions.f:0 x", "{}") + kKE, 0, true, {"f() functions.f:0"}},
      {K, A, kKB + kKCB + "functions.f:0<x>" + kKA + "{}" + kKCE + kKE, 0, true, {"f() functions.f:0"}},
      {K, A, kKB + kimi_call("functions.:0", "{}") + kimi_call("get_time:7", "{}") + kKE, 1},
      // Pythonic: a call's name once '(' follows it, then its arguments as JSON one keyword at a time.
      {P, A, " [get_weather(city='Paris, \"FR\"', days=3, hourly=True, tags=['a', {'b': None}]), get_time()]\n", 2},
      {P, A, "[f(x=-1.5e3, s='''tri\\'ple'''), g(q=\"\\u00e9\\n\", n=12_000,)]", 2},
      {P, A, "[f(a=1), g(b=2)]", 1, false},
      {P, A, "[f(a=1)] and then text", 0, true, {"f({\"a\":1})"}},  // announced, then the text rules the list out
      {P, A, "Hi [f()]", 0},
      // Leading whitespace (read once), and a value that cannot parse once a ',' follows it: no call after it streams.
      {L, A, " \n\t <|python_tag|> \n {\"name\": \"f\", \"parameters\": {}}", 1},
      {L, A, " \n <|python_tag|> <|python_tag|>{\"name\": \"f\", \"parameters\": {}}", 0},
      {P, A, " \n [ \n f( a=1 ,\n b=[2] ) , g() ]", 2},
      {P, A, "[f(a='x' + 'y', b=2), g()]", 0, true, {"f({)"}},
      {P, A, "[f(a=1, b=x), g(c=3)]", 0, true, {"f({\"a\":1)"}},
      {P, A, "[f(a=1), g(a=2, a=3), h()]", 0, true, {"f({\"a\":1})", "g({\"a\":2)"}},
      {D3, F, "{\"city\": \"Rome\"}", 1, true, {}, "get_weather"},
      {D31, F, "{\"city\": \"Rome\", \"days\": [1, 2]}", 1, true, {}, "get_weather"},
      {K, F, "{\"city\": \"Rome\"}", 1, true, {}, "get_weather"},
  };
}

std::string label(const Case& c) {
  return std::string(tool_format_name(c.format)) + (c.mode == ToolMode::forced ? " forced: " : " auto: ") + c.text;
}

Streamed run(const Case& c, const std::vector<std::string>& pieces) {
  return run(c.format, c.mode, c.parallel, pieces, c.forced_name);
}
ParsedAnswer whole(const Case& c) { return whole(c.format, c.mode, c.parallel, c.text, c.forced_name); }

TEST(ToolStreamSplits, EveryTwoAndThreePieceSplit) {
  for (const Case& c : cases()) {
    const ParsedAnswer w = whole(c);
    ASSERT_EQ(w.calls.size(), c.calls) << label(c);
    testing::for_each_split(c.text, 90, [&](const std::vector<std::string>& pieces, const std::string& where) {
      expect_same(w, run(c, pieces), label(c) + " split " + where, c.stale, c.format == ToolFormat::kimi_k2);
    });
  }
}

TEST(ToolStreamSplits, RandomChunkingsAndByteByByte) {
  std::mt19937 rng(7);
  for (const Case& c : cases()) {
    const ParsedAnswer w = whole(c);
    for (int round = 0; round < 200; ++round) {
      std::vector<std::string> pieces;
      for (size_t at = 0; at < c.text.size();) {
        const size_t n = std::min(c.text.size() - at, size_t(rng() % 7));  // empty pieces too
        pieces.push_back(c.text.substr(at, n));
        at += n;
      }
      expect_same(w, run(c, pieces), label(c) + " round " + std::to_string(round), c.stale,
                  c.format == ToolFormat::kimi_k2);
    }
  }
}

// Streaming is incremental: fed a byte at a time, every call's arguments have gone out before the choice ends
// (these answers all close their calls), an object's as it is written: halfway through the first call's arguments,
// half of them are out.
TEST(ToolStreamSplits, ArgumentsGoOutAsTheyAreWritten) {
  for (const Case& c : cases()) {
    if (c.calls == 0 || !c.stale.empty()) continue;  // (the calls after a stale one go out at the end)
    std::vector<std::string> bytes;
    for (char ch : c.text) bytes.push_back(std::string(1, ch));
    const Streamed s = run(c, bytes);
    const ParsedAnswer w = whole(c);
    size_t total = 0;
    for (const ToolCall& call : w.calls) total += call.arguments.size();
    EXPECT_EQ(s.arguments_before_finish, total) << label(c);
  }
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"text\": \"abcdefghij\"}}</tool_call>";
  const size_t half = text.find("fgh");
  const Streamed s = run(ToolFormat::hermes, ToolMode::automatic, true, {text.substr(0, half)});
  ASSERT_EQ(s.names.size(), 1u);
  EXPECT_EQ(s.arguments_before_finish, std::string("{\"text\": \"abcde").size());
}

// Arguments of about `bytes` bytes: a string with escapes, braces, brackets and the starts of markers, nested values.
std::string long_arguments(size_t bytes) {
  std::string a = "{\"text\": \"";
  for (size_t i = 0; a.size() < bytes; ++i) a += i % 4 == 0 ? "\\\"{[</tool ;, [TOOL_ [ARGS] \\\\ " : "na\xc3\xafve words ";
  return a + "\", \"list\": [1, {\"b\": [null, \"}\"]}, -2.5e3], \"t\": true}";
}

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) q += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return q + "\"";
}

// Two long calls in each format these streams read incrementally (Hermes with string arguments too; pythonic's as
// Python strings, which go out whole, at their keyword's end).
std::vector<Case> long_calls(const std::string& args) {
  const ToolMode A = ToolMode::automatic;
  return {
      {ToolFormat::hermes, A,
       "Text <tool_call>\n{\"name\": \"f\", \"arguments\": " + args + "}\n</tool_call>\n<tool_call>{\"name\": \"g\", "
       "\"arguments\": " + args + "}</tool_call>", 2},
      {ToolFormat::hermes, A, "<tool_call>{\"arguments\": " + quoted(args) + ", \"name\": \"f\"}</tool_call>", 1},
      {ToolFormat::llama3_json, A,
       "{\"name\": \"f\", \"parameters\": " + args + "}; {\"name\": \"g\", \"parameters\": " + args + "}", 2},
      {ToolFormat::mistral, A,
       "Hi[TOOL_CALLS][{\"name\": \"f\", \"arguments\": " + args + "}, {\"name\": \"g\", \"arguments\": " + args + "}]", 2},
      {ToolFormat::mistral, A, "[TOOL_CALLS]f[ARGS]" + args + "[TOOL_CALLS]g[ARGS] " + args, 2},
      {ToolFormat::pythonic, A,
       "[f(text=" + quoted(args) + ", n=[1, {'b': None}], t=True), g(s='''" + args + "''', u=-2.5)]", 2},
  };
}

// The corners once read again per push, at `bytes` bytes: a Llama 3.x / pythonic answer's leading whitespace (and the
// space between a pythonic list's parts), and a pythonic keyword whose value does not parse once a ',' follows it
// (the whole answer is content; the call announced before it stays sent).
std::vector<Case> corners(const std::string& args) {
  std::string space;
  for (size_t i = 0; space.size() < args.size(); ++i) space += i % 8 == 7 ? '\n' : ' ';
  const ToolMode A = ToolMode::automatic;
  return {
      {ToolFormat::llama3_json, A, space + "{\"name\": \"f\", \"parameters\": {\"a\": 1}}", 1},
      {ToolFormat::llama3_json, A, space + "<|python_tag|>" + space + "{\"name\": \"f\", \"parameters\": {}}", 1},
      {ToolFormat::pythonic, A, space + "[" + space + "f(" + space + "a=1" + space + ")" + space + "]", 1},
      {ToolFormat::pythonic, A, "[f(text=" + quoted(args) + " + 'x', t= + args + )]", 0, true, {"f({)"}},
  };
}

TEST(ToolStreamSplits, CornersByteByByteAndInPieces) {
  std::mt19937 rng(5);
  for (const Case& c : corners(long_arguments(64 * 1024))) {
    const ParsedAnswer w = whole(c);
    ASSERT_EQ(w.calls.size(), c.calls) << label(c).substr(0, 80);
    for (const std::vector<std::string>& p : testing::bytes_and_random_pieces(c.text, rng)) {
      const Streamed s = run(c, p);
      expect_same(w, s, label(c).substr(0, 80), c.stale);
    }
  }
}

// Long calls fed a byte at a time and in random pieces read as the whole answer does, their arguments out before
// the choice ends.
TEST(ToolStreamSplits, LongCallsByteByByteAndInPieces) {
  std::mt19937 rng(3);
  for (const Case& c : long_calls(long_arguments(64 * 1024))) {
    const ParsedAnswer w = whole(c);
    ASSERT_EQ(w.calls.size(), c.calls) << label(c).substr(0, 80);
    size_t total = 0;
    for (const ToolCall& call : w.calls) total += call.arguments.size();
    for (const std::vector<std::string>& p : testing::bytes_and_random_pieces(c.text, rng)) {
      const Streamed s = run(c, p);
      expect_same(w, s, label(c).substr(0, 80));
      EXPECT_EQ(s.arguments_before_finish, total) << label(c).substr(0, 80);
    }
  }
}

// A push reads its own bytes (and a marker's length around them), not the open call again: a call 8 times as long
// costs about 8 times as much to stream in 4-byte tokens, where reading the open call per push costs about 64 times.
// The thread's CPU time, not the wall clock: a loaded machine's preemptions would land on the longer runs.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

TEST(ToolStreamSplits, APushCostsItsOwnBytesNotTheCallsLength) {
  const auto cost = [](const Case& c, bool streams_arguments) {
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
      const double t0 = thread_cpu_seconds();
      ToolCallStream s(c.format, c.mode, c.parallel);
      size_t deltas = 0;
      for (size_t at = 0; at < c.text.size(); at += 4) deltas += s.push(c.text.substr(at, 4)).calls.size();
      best = std::min(best, thread_cpu_seconds() - t0);
      if (streams_arguments && c.format != ToolFormat::pythonic)  // the arguments went out as they grew
        EXPECT_GT(deltas, c.text.size() / 8) << label(c).substr(0, 80);
    }
    return best;
  };
  const std::vector<Case> small = long_calls(long_arguments(16 * 1024)), large = long_calls(long_arguments(128 * 1024));
  for (size_t i = 0; i < small.size(); ++i) {
    if (small[i].text.find("\"arguments\": \"") != std::string::npos) continue;  // (string arguments go out whole)
    const double ratio = cost(large[i], true) / cost(small[i], true);
    EXPECT_LT(ratio, 24) << label(small[i]).substr(0, 80);
  }
  const std::vector<Case> small_corners = corners(long_arguments(16 * 1024)),
                          large_corners = corners(long_arguments(128 * 1024));
  for (size_t i = 0; i < small_corners.size(); ++i) {
    const double ratio = cost(large_corners[i], false) / cost(small_corners[i], false);
    EXPECT_LT(ratio, 24) << label(small_corners[i]).substr(0, 80);
  }
}

// One malformed Hermes block turns the whole answer into content (vLLM's rule): calls announced before it stay
// sent, the rest of the content follows when the choice ends, and the choice finishes as the whole answer does
// ("stop", not "tool_calls").
TEST(ToolStreamSplits, AMalformedBlockMakesTheAnswerContent) {
  const std::string text = "Hi <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"
                           "<tool_call>{\"name\": \"g\", \"arguments\": {\"city\": }}</tool_call>";
  const ParsedAnswer w = whole(ToolFormat::hermes, ToolMode::automatic, true, text);
  EXPECT_TRUE(w.calls.empty());
  EXPECT_EQ(w.content, text);
  testing::for_each_split(text, 0, [&](const std::vector<std::string>& pieces, const std::string& where) {
    const Streamed s = run(ToolFormat::hermes, ToolMode::automatic, true, pieces);
    expect_same(w, s, where, {"f({})", "g({\"city\": })"});
  });
}

// A stale call is continued only by the same call: DeepSeek gives no ids, so a block announced with "{" and then
// broken goes on as the next block when that one has its name and extends its text (the client then has the whole
// answer's call), and not when it names another function (g's "{}" once extended f's "{" into f({}), a call the
// answer never makes).
TEST(ToolStreamSplits, AStaleCallIsContinuedOnlyByTheSameCall) {
  const auto joined = [](const std::string& text) {
    const Streamed s = run(ToolFormat::deepseek_v31, ToolMode::automatic, true, {text});
    std::vector<std::string> calls;
    for (size_t i = 0; i < s.names.size(); ++i) calls.push_back(shown(s.names[i], s.arguments[i], "", false));
    return calls;
  };
  EXPECT_EQ(joined(kB + v31_call("f", "{") + v31_call("f", "{\"a\": 1}") + kE),
            (std::vector<std::string>{"f({\"a\": 1})"}));
  EXPECT_EQ(joined(kB + v31_call("f", "{") + v31_call("g", "{}") + kE), (std::vector<std::string>{"f({)", "g({})"}));
  EXPECT_EQ(joined(kB + v31_call("f", "{\"a\"") + v31_call("f", "{}") + kE),
            (std::vector<std::string>{"f({\"a\")", "f({})"}));
}

// Kimi-K2's call goes out as vLLM's kimi_k2 sends it, once its id is whole (before the arguments' '{'): not while
// the id's last digit may be followed by another, nor while what follows may still be the call's end marker.
TEST(ToolStreamSplits, KimiCallsAreAnnouncedAtTheirId) {
  ToolCallStream s(ToolFormat::kimi_k2, ToolMode::automatic, true);
  EXPECT_TRUE(s.push("Hi" + kKB + kKCB + "functions.get_time:1").calls.empty());
  EXPECT_TRUE(s.push("2").calls.empty());
  EXPECT_TRUE(s.push(kKA.substr(0, 12)).calls.empty());  // "<|tool_call_": <|tool_call_end|> too
  ToolStreamStep step = s.push(kKA.substr(12, 1));
  ASSERT_EQ(step.calls.size(), 1u);
  EXPECT_TRUE(step.calls[0].first);
  EXPECT_EQ(step.calls[0].id, "functions.get_time:12");
  EXPECT_EQ(step.calls[0].name, "get_time");
  EXPECT_EQ(step.calls[0].arguments, "");
  EXPECT_TRUE(s.push(kKA.substr(13) + " ").calls.empty());
  step = s.push("{\"a\"");
  ASSERT_EQ(step.calls.size(), 1u);
  EXPECT_FALSE(step.calls[0].first);
  EXPECT_EQ(step.calls[0].arguments, "{\"a\"");
  // A space ends the id too; a broken id is never announced.
  ToolCallStream t(ToolFormat::kimi_k2, ToolMode::automatic, true);
  step = t.push(kKB + kKCB + "functions.f:0 ");
  ASSERT_EQ(step.calls.size(), 1u);
  EXPECT_EQ(step.calls[0].id, "functions.f:0");
  ToolCallStream u(ToolFormat::kimi_k2, ToolMode::automatic, true);
  EXPECT_TRUE(u.push(kKB + kKCB + "functions.f:0x ").calls.empty());
  EXPECT_FALSE(u.called());
}

// Two choices' streams keep their own indices and ids.
TEST(ToolStreamSplits, IdsAreFreshPerCall) {
  const std::string text = "<tool_call>{\"name\": \"f\"}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>";
  const Streamed a = run(ToolFormat::hermes, ToolMode::automatic, true, {text});
  const Streamed b = run(ToolFormat::hermes, ToolMode::automatic, true, {text});
  ASSERT_EQ(a.ids.size(), 2u);
  ASSERT_EQ(b.ids.size(), 2u);
  EXPECT_NE(a.ids[0], a.ids[1]);
  EXPECT_NE(a.ids[0], b.ids[0]);
  EXPECT_EQ(a.arguments, (std::vector<std::string>{"{}", "{}"}));
}

// "required" with several calls (the request side: server/tool_request_test.cc): per format, two calls in the
// format's own syntax read back as those calls, whole or streamed; cut inside the second, the answer is content.
TEST(RequiredCalls, SeveralCallsInEachFormatsSyntax) {
  for (const testing::TwoCalls& w : testing::kRequiredTwoCalls) {
    const std::string what = tool_format_name(w.format);
    const ParsedAnswer a = read_answer(w.text, ToolMode::forced, true, w.format);
    ASSERT_EQ(a.calls.size(), 2u) << what;
    EXPECT_EQ(a.calls[0].name, "get_time");
    EXPECT_EQ(a.calls[1].name, "get_weather");
    EXPECT_EQ(a.calls[1].arguments, "{\"city\": \"Oslo\"}");
    EXPECT_TRUE(a.content.empty());
    testing::for_each_split(w.text, 0, [&](const std::vector<std::string>& pieces, const std::string& where) {
      expect_same(a, run(w.format, ToolMode::forced, true, pieces), what + " split " + where);
    });
    // Cut inside the second call: content, as a single forced call cut by max_tokens is.
    const std::string cut = w.text.substr(0, w.text.size() - 8);
    EXPECT_TRUE(read_answer(cut, ToolMode::forced, true, w.format).calls.empty()) << what;
    EXPECT_EQ(read_answer(cut, ToolMode::forced, true, w.format).content, cut) << what;
  }
}

}  // namespace
}  // namespace attnzoo::answers
