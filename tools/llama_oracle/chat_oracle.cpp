// chat-oracle: llama.cpp's own chat code (common/chat.h), driven by JSON requests.
//
// It renders a chat through a template the way llama-server does (common_chat_templates_init
// with the template's source and fixed bos/eos strings, then common_chat_templates_apply) and
// parses a model's output with the parser that rendering derives (common_chat_parse), whole
// or prefix by prefix as a stream, as tests/test-chat.cpp drives them. SpecChat's tests
// record its answers and compare SpecChat's own rendering and parsing with them.
//
// stdin: one request, or an array of them; stdout: one answer, or an array in the same order.
// A request:
//   {"op": "render" | "parse",
//    "template": source, "bos_token": str, "eos_token": str,
//    "messages": [OpenAI messages], "tools": [OpenAI tools] | null,
//    "enable_thinking": bool (true), "add_generation_prompt": bool (true),
//    "chat_template_kwargs": {name: any JSON} ({}), "reasoning_format": str ("deepseek"),
//    "parallel_tool_calls": bool (true), "now": unix seconds (the clock strftime_now reads,
//    and the date_string and datetime llama.cpp gives every template),
//    parse only: "output": str, "is_partial": bool (false),
//                "stream": [prefix lengths in bytes] (absent: no stream)}
// render answers {"prompt", "format", "generation_prompt", "parser", "supports_thinking",
//   "thinking_start_tag", "thinking_end_tags", "additional_stops", "preserved_tokens"};
// parse answers {"message": {"content", "reasoning_content", "tool_calls": [{"id", "name",
//   "arguments"}]}} or {"error"}, and with "stream" also "stream": [{"end", "diffs"} or
//   {"end", "error"}] for each prefix parsed with is_partial=true (the last one: the
//   request's is_partial), diffs as common_chat_msg_diff::compute_diffs gives them (a
//   tool call's delta with only its non-empty id, name and arguments).
// Any failure answers {"error": what llama.cpp threw}.
// llama.cpp's log goes to stderr; stdout carries only the answer.

#include "chat.h"
#include "common.h"
#include "log.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using ojson = nlohmann::ordered_json;

// llama.cpp's jinja reads the clock with time() (jinja::context, for strftime_now) and
// ignores common_chat_templates_inputs::now; this definition takes the place of libc's for
// the whole static binary, so a request's "now" fixes the date a template writes.
static std::optional<time_t> g_now;

extern "C" time_t time(time_t * out) {
    time_t value;
    if (g_now) {
        value = *g_now;
    } else {
        timespec ts{};
        clock_gettime(CLOCK_REALTIME, &ts);
        value = ts.tv_sec;
    }
    if (out != nullptr) {
        *out = value;
    }
    return value;
}

static std::string format_now(const char * format) {
    char      buf[64];
    const tm * when = std::localtime(&*g_now);
    return std::strftime(buf, sizeof(buf), format, when) ? std::string(buf) : std::string();
}

static common_json to_common(const ojson & value) {
    return common_json::parse(value.dump());
}

static common_chat_templates_inputs make_inputs(const ojson & req) {
    common_chat_templates_inputs inputs;
    inputs.messages = common_chat_msgs_parse_oaicompat(to_common(req.value("messages", ojson::array())));
    if (req.contains("tools") && req["tools"].is_array()) {
        inputs.tools = common_chat_tools_parse_oaicompat(to_common(req["tools"]));
    }
    inputs.enable_thinking       = req.value("enable_thinking", true);
    inputs.add_generation_prompt = req.value("add_generation_prompt", true);
    inputs.parallel_tool_calls   = req.value("parallel_tool_calls", true);
    inputs.reasoning_format      = common_reasoning_format_from_name(req.value("reasoning_format", "deepseek"));
    inputs.use_jinja             = true;
    if (g_now) {
        // common_chat_extra_context gives every template these two from the wall clock
        // (system_clock, which the time() above does not reach); kwargs take their place
        inputs.chat_template_kwargs["datetime"]    = ojson(format_now("%b %d %Y")).dump();
        inputs.chat_template_kwargs["date_string"] = ojson(format_now("%d %b %Y")).dump();
    }
    if (req.contains("chat_template_kwargs") && req["chat_template_kwargs"].is_object()) {
        for (const auto & [key, value] : req["chat_template_kwargs"].items()) {
            inputs.chat_template_kwargs[key] = value.dump();
        }
    }
    return inputs;
}

static ojson message_json(const common_chat_msg & msg) {
    ojson calls = ojson::array();
    for (const auto & call : msg.tool_calls) {
        calls.push_back({ { "id", call.id }, { "name", call.name }, { "arguments", call.arguments } });
    }
    return {
        { "content", msg.content },
        { "reasoning_content", msg.reasoning_content },
        { "tool_calls", calls },
    };
}

static ojson diff_json(const common_chat_msg_diff & diff) {
    ojson out = ojson::object();
    if (!diff.reasoning_content_delta.empty()) {
        out["reasoning_content_delta"] = diff.reasoning_content_delta;
    }
    if (!diff.content_delta.empty()) {
        out["content_delta"] = diff.content_delta;
    }
    if (diff.tool_call_index != std::string::npos) {
        // only the parts the diff carries (compute_diffs leaves the others empty)
        ojson delta = ojson::object();
        for (const auto & [key, value] : { std::pair<const char *, const std::string &>{ "id", diff.tool_call_delta.id },
                                           { "name", diff.tool_call_delta.name },
                                           { "arguments", diff.tool_call_delta.arguments } }) {
            if (!value.empty()) {
                delta[key] = value;
            }
        }
        out["tool_call_index"] = diff.tool_call_index;
        out["tool_call_delta"] = delta;
    }
    return out;
}

static ojson render(const common_chat_templates * tmpls, const common_chat_templates_inputs & inputs) {
    const common_chat_params params = common_chat_templates_apply(tmpls, inputs);
    return {
        { "prompt", params.prompt },
        { "format", common_chat_format_name(params.format) },
        { "generation_prompt", params.generation_prompt },
        { "parser", params.parser },
        { "supports_thinking", params.supports_thinking },
        { "thinking_start_tag", params.thinking_start_tag },
        { "thinking_end_tags", params.thinking_end_tags },
        { "additional_stops", params.additional_stops },
        { "preserved_tokens", params.preserved_tokens },
    };
}

static ojson parse(const common_chat_templates * tmpls, const common_chat_templates_inputs & inputs, const ojson & req) {
    const common_chat_params params = common_chat_templates_apply(tmpls, inputs);
    common_chat_parser_params parser_params(params);
    parser_params.reasoning_format = inputs.reasoning_format;
    if (!params.parser.empty()) {
        parser_params.parser.load(params.parser);
    }
    const std::string output     = req.value("output", "");
    const bool        is_partial = req.value("is_partial", false);

    ojson answer = ojson::object();
    try {
        answer["message"] = message_json(common_chat_parse(output, is_partial, parser_params));
    } catch (const std::exception & e) {
        answer["error"] = e.what();
    }
    if (!req.contains("stream")) {
        return answer;
    }
    // As a server streams: each prefix parsed as partial, each message diffed with the last
    // one that parsed (a prefix that fails to parse is recorded and skipped, as the server
    // keeps its last message when a partial parse throws).
    ojson           steps = ojson::array();
    common_chat_msg previous;
    previous.role = "assistant";
    const auto &    ends  = req["stream"];
    for (size_t i = 0; i < ends.size(); ++i) {
        const size_t end  = std::min<size_t>(ends[i].get<size_t>(), output.size());
        const bool   last = i + 1 == ends.size();
        ojson        step = { { "end", end } };
        try {
            const common_chat_msg current =
                common_chat_parse(output.substr(0, end), last ? is_partial : true, parser_params);
            ojson diffs = ojson::array();
            for (const auto & diff : common_chat_msg_diff::compute_diffs(previous, current)) {
                diffs.push_back(diff_json(diff));
            }
            previous = current;
            if (diffs.empty()) {
                continue;
            }
            step["diffs"] = diffs;
        } catch (const std::exception & e) {
            step["error"] = e.what();
        }
        steps.push_back(step);
    }
    answer["stream"] = steps;
    return answer;
}

static ojson answer(const ojson & req) {
    try {
        if (req.contains("now") && req["now"].is_number_integer()) {
            g_now = req["now"].get<time_t>();
        } else {
            g_now.reset();
        }
        auto tmpls = common_chat_templates_init(
            nullptr, req.at("template").get<std::string>(), req.value("bos_token", ""), req.value("eos_token", ""));
        const auto inputs = make_inputs(req);
        const auto op     = req.value("op", "render");
        if (op == "render") {
            return render(tmpls.get(), inputs);
        }
        if (op == "parse") {
            return parse(tmpls.get(), inputs, req);
        }
        return { { "error", "unknown op: " + op } };
    } catch (const std::exception & e) {
        return { { "error", e.what() } };
    }
}

int main() {
    // fixed zone: strftime_now formats localtime(), which must not depend on the machine
    setenv("TZ", "UTC", 1);
    tzset();
    // keep stdout for the answer; anything llama.cpp prints goes to stderr
    FILE * out = fdopen(dup(fileno(stdout)), "w");
    dup2(fileno(stderr), fileno(stdout));
    common_log_set_verbosity_thold(-1);

    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    ojson request;
    try {
        request = ojson::parse(text);
    } catch (const std::exception & e) {
        fprintf(stderr, "chat-oracle: stdin is not JSON: %s\n", e.what());
        return 2;
    }
    ojson result;
    if (request.is_array()) {
        result = ojson::array();
        for (const auto & req : request) {
            result.push_back(answer(req));
        }
    } else {
        result = answer(request);
    }
    // invalid UTF-8 in a prompt (a template cutting a character) must not abort the dump
    const std::string dumped = result.dump(-1, ' ', false, ojson::error_handler_t::replace);
    fprintf(out, "%s\n", dumped.c_str());
    fclose(out);
    return 0;
}
