// spec-oracle: llama.cpp's own speculative decoding loop, recorded round by round.
//
// This is examples/speculative-simple/speculative-simple.cpp from the llama.cpp that
// llama-cpp-python 0.3.36 vendors, with three changes and no others to the loop:
//   - the prompt comes as token ids (--prompt-ids 1,2,3), so no tokenizer enters;
//   - every pass of the loop prints one JSON line (what was drafted, what the target
//     sampled), and the end prints the generated ids; the text output is gone;
//   - defaults suit an oracle: greedy (temp 0), one thread, draft p-min 0 and n-min 0,
//     no warm-up. Any llama.cpp option for the speculative example still overrides them.
//     (It is built for the CPU alone, so nothing is offloaded.)
// The JSON lines are the only thing on stdout; llama.cpp's log goes to stderr.

#include "arg.h"
#include "common.h"
#include "sampling.h"
#include "speculative.h"
#include "log.h"
#include "llama.h"

#include <algorithm>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

// stdout, kept for the JSON lines before fd 1 is pointed at stderr
static FILE * g_json = nullptr;

static std::string json_ids(const llama_tokens & ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) {
            s += ",";
        }
        s += std::to_string(ids[i]);
    }
    return s + "]";
}

static void emit(const std::string & line) {
    fprintf(g_json, "%s\n", line.c_str());
    fflush(g_json);
}

// Takes --prompt-ids out of argv (llama.cpp's parser would refuse it); true when well formed.
static bool take_prompt_ids(int & argc, char ** argv, llama_tokens & ids) {
    int out = 1;
    bool seen = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--prompt-ids") != 0) {
            argv[out++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) {
            return false;
        }
        seen = true;
        for (const auto & part : string_split<std::string>(argv[++i], ',')) {
            char * end = nullptr;
            const long id = std::strtol(part.c_str(), &end, 10);
            if (part.empty() || *end != '\0' || id < 0) {
                return false;
            }
            ids.push_back((llama_token) id);
        }
    }
    argc = out;
    argv[argc] = nullptr;
    return seen;
}

static void oracle_defaults(common_params & params) {
    params.sampling.temp = 0.0f; // greedy: the temperature sampler keeps only the argmax
    params.sampling.seed = 0;
    params.cpuparams.n_threads = 1;
    params.cpuparams_batch.n_threads = 1;
    params.speculative.draft.cpuparams.n_threads = 1;
    params.speculative.draft.cpuparams_batch.n_threads = 1;
    params.fit_params = false; // nothing to fit on a CPU, and it would load the model twice
    params.warmup = false;
    params.speculative.draft.n_min = 0;
    params.speculative.draft.p_min = 0.0f; // the oracle's K is a fixed K: no confidence cut-off
}

int main(int argc, char ** argv) {
    std::setlocale(LC_NUMERIC, "C");

    // JSON keeps the real stdout; everything else printed to fd 1 lands on stderr
    g_json = fdopen(dup(STDOUT_FILENO), "w");
    dup2(STDERR_FILENO, STDOUT_FILENO);

    llama_tokens inp;
    if (!take_prompt_ids(argc, argv, inp) || inp.size() < 2) {
        fprintf(stderr, "spec-oracle: --prompt-ids ID,ID,... (at least two ids) is required\n");
        return 2;
    }

    common_params params;
    oracle_defaults(params);

    common_init();

    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_SPECULATIVE)) {
        return 1;
    }

    if (params.n_predict < -1) {
        LOG_ERR("%s: --n-predict must be >= -1\n", __func__);
        return 1;
    }

    const auto output_limits = common_speculative_get_output_limits(
            params.n_batch, params.n_parallel, common_speculative_n_max(&params.speculative));
    params.n_outputs_max = output_limits.total;
    params.n_outputs_max_per_seq = output_limits.per_seq;

    llama_backend_init();
    llama_numa_init(params.numa);

    auto llama_init_tgt = common_init_from_params(params);

    llama_model   * model_tgt = llama_init_tgt->model();
    llama_context * ctx_tgt   = llama_init_tgt->context();
    if (model_tgt == nullptr || ctx_tgt == nullptr) {
        LOG_ERR("%s: failed to load the target model\n", __func__);
        return 1;
    }

    const llama_vocab * vocab = llama_model_get_vocab(model_tgt);

    const int n_vocab = llama_vocab_n_tokens(vocab);
    for (auto id : inp) {
        if (id >= n_vocab) {
            LOG_ERR("%s: prompt id %d is outside the vocabulary (%d tokens)\n", __func__, id, n_vocab);
            return 2;
        }
    }

    // the draft model, or the MTP draft context, comes from llama.cpp's own set-up
    common_speculative_init_result_ptr spec_init;
    {
        common_params params_dft = common_base_params_to_speculative(params);

        spec_init = common_speculative_init_from_params(params_dft, model_tgt, ctx_tgt);

        params.speculative.draft.ctx_tgt = ctx_tgt;
        params.speculative.draft.ctx_dft = spec_init->context();
    }

    llama_context * ctx_dft = params.speculative.draft.ctx_dft;

    // a target whose memory can only drop whole sequences (recurrent, hybrid) verifies from checkpoints
    const bool use_ckpt_tgt = common_context_can_seq_rm(ctx_tgt) == COMMON_CONTEXT_SEQ_RM_TYPE_FULL;
    const bool use_ckpt_dft = common_context_can_seq_rm(ctx_dft) == COMMON_CONTEXT_SEQ_RM_TYPE_FULL;

    if (use_ckpt_tgt) {
        LOG_INF("speculative decoding will use checkpoints (context does not support partial sequence removal)\n");
    }

    if (llama_n_ctx(ctx_tgt) < (uint32_t) inp.size() || llama_n_batch(ctx_tgt) < (uint32_t) inp.size()) {
        LOG_ERR("%s: the prompt (%d tokens) exceeds the context (%d) or the batch (%d)\n", __func__,
                (int) inp.size(), llama_n_ctx(ctx_tgt), llama_n_batch(ctx_tgt));
        return 1;
    }

    int n_predict = 0;
    bool has_eos = false;
    llama_seq_id seq_id = 0;
    llama_tokens generated;

    common_sampler_ptr smpl(common_sampler_init(model_tgt, params.sampling));

    struct common_speculative * spec = common_speculative_init(params.speculative, 1);
    if (spec == nullptr) {
        LOG_ERR("%s", "failed to initialize speculative decoding\n");
        return 1;
    }

    // the prompt but its last token goes to the target and to the speculative implementation(s)
    {
        common_batch batch_prompt(ctx_tgt);
        for (size_t i = 0; i < inp.size() - 1; ++i) {
            batch_prompt.add(inp[i], i, seq_id, false);
        }

        if (llama_process(ctx_tgt, LLAMA_PROCESS_TYPE_DECODE, batch_prompt.get()) != 0) {
            LOG_ERR("%s", "failed to decode the prompt\n");
            return 1;
        }

        if (!common_speculative_process(spec, batch_prompt)) {
            LOG_ERR("%s", "failed to process speculative prompt\n");
            return 1;
        }
    }

    llama_token id_last = inp.back();

    llama_tokens prompt_tgt(inp.begin(), inp.end() - 1);
    prompt_tgt.reserve(llama_n_ctx(ctx_tgt));

    int n_past = inp.size() - 1;

    common_speculative_begin(spec, seq_id, prompt_tgt);

    common_batch batch_tgt(ctx_tgt);

    llama_tokens draft;

    common_prompt_checkpoint ckpt;

    for (int round = 0; ; ++round) {
        // a non-empty draft here is the accepted part of a draft the checkpoint path re-verifies
        const bool reused = !draft.empty();

        if (draft.empty()) {
            ckpt.update_pos(
                    prompt_tgt.size(),
                    llama_memory_seq_pos_min(llama_get_memory(ctx_tgt), seq_id),
                    llama_memory_seq_pos_max(llama_get_memory(ctx_tgt), seq_id));

            if (use_ckpt_dft) {
                ckpt.update_dft(ctx_dft, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
            }

            // the longest draft that fits the remaining context and generation budget
            int n_draft_max = (int) llama_n_ctx(ctx_tgt) - n_past - 2;
            if (params.n_predict >= 0) {
                n_draft_max = std::min(n_draft_max, params.n_predict - n_predict - 1);
            }
            n_draft_max = std::max(n_draft_max, 0);

            common_speculative_get_draft_params(spec, seq_id) = {
                /* .drafting   = */ true,
                /* .n_max      = */ n_draft_max,
                /* .pos0       = */ n_past,
                /* .id_last    = */ id_last,
                /* .prompt     = */ &prompt_tgt,
                /* .result     = */ &draft,
            };
            common_speculative_draft(spec);

            if (!draft.empty()) {
                if (use_ckpt_tgt) {
                    ckpt.update_tgt(ctx_tgt, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
                }
            }

            if (ctx_dft) {
                if (use_ckpt_dft) {
                    ckpt.load_dft(ctx_dft, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
                }

                llama_memory_seq_rm(llama_get_memory(ctx_dft), seq_id, ckpt.pos_max + 1, -1);
            }
        } else {
            if (use_ckpt_tgt) {
                GGML_ASSERT(!ckpt.empty());
            }
        }

        const int pos = n_past;

        // the target evaluates [id_last, draft0, ..., draftN-1]
        batch_tgt.clear();
        batch_tgt.add(id_last, n_past++, seq_id, true);
        for (size_t i = 0; i < draft.size(); ++i) {
            batch_tgt.add(draft[i], n_past + i, seq_id, true);
        }

        if (llama_process(ctx_tgt, LLAMA_PROCESS_TYPE_DECODE, batch_tgt.get()) != 0) {
            LOG_ERR("%s", "failed to decode the target batch\n");
            return 1;
        }

        if (!common_speculative_process(spec, batch_tgt)) {
            LOG_ERR("%s", "failed to process speculative batch\n");
            return 1;
        }

        common_sampler_ptr smpl_save;
        if (use_ckpt_tgt) {
            smpl_save.reset(common_sampler_clone(smpl.get()));
        }

        const size_t n_draft = draft.size();
        const llama_tokens drafted = draft;

        auto ids = common_sampler_sample_and_accept_n(smpl.get(), ctx_tgt, draft);

        GGML_ASSERT(ids.size() > 0);

        const bool restored = use_ckpt_tgt && ids.size() - 1 < n_draft;

        emit(string_format(
                "{\"round\": %d, \"pos\": %d, \"draft\": %s, \"accepted\": %d, \"ids\": %s, \"reused\": %s, \"restored\": %s}",
                round, pos, json_ids(drafted).c_str(), (int) ids.size() - 1, json_ids(ids).c_str(),
                reused ? "true" : "false", restored ? "true" : "false"));

        // partial acceptance on a checkpointed target: back to the checkpoint, and the
        // accepted tokens become the next pass's draft
        if (restored) {
            LOG_DBG("partial acceptance: %zu < %zu, restoring checkpoint\n", ids.size() - 1, n_draft);

            draft = std::move(ids);

            ckpt.load_tgt(ctx_tgt, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
            llama_memory_seq_rm(llama_get_memory(ctx_tgt), seq_id, ckpt.pos_max + 1, -1);

            if (ctx_dft) {
                ckpt.load_dft(ctx_dft, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
                llama_memory_seq_rm(llama_get_memory(ctx_dft), seq_id, ckpt.pos_max + 1, -1);
            }

            prompt_tgt.resize(ckpt.n_tokens);
            smpl = std::move(smpl_save);

            n_past = (int) prompt_tgt.size();

            continue;
        }

        common_speculative_accept(spec, seq_id, ids.size() - 1);

        n_past    += ids.size() - 1;
        n_predict += ids.size();

        for (size_t i = 0; i < ids.size(); ++i) {
            prompt_tgt.push_back(id_last);

            id_last = ids[i];
            generated.push_back(id_last);

            if (llama_vocab_is_eog(vocab, id_last)) {
                has_eos = true;
                break;
            }
        }

        draft.clear();

        llama_memory_seq_rm(llama_get_memory(ctx_tgt), seq_id, n_past, -1);
        if (ctx_dft) {
            llama_memory_seq_rm(llama_get_memory(ctx_dft), seq_id, n_past, -1);
        }

        if ((params.n_predict >= 0 && n_predict > params.n_predict) || has_eos) {
            break;
        }
    }

    emit("{\"tokens\": " + json_ids(generated) + "}");

    common_speculative_print_stats(spec);
    common_speculative_free(spec);

    llama_backend_free();

    return 0;
}
