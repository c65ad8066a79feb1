// Help texts of the kvscope commands. Defaults and ranges here are the ones the commands check.
#include "app/cli/usage.h"

#include <map>

namespace kvs {

const char* usage_summary() {
  return "usage: kvscope [gui [trace.h5] [--model PATH] [--screenshot out.png --view NAME --step N --size WxH\n"
         "                      --script S --text-size PX]]\n"
         "       kvscope record [--model PATH] [--tokenizer PATH] (--prompt TEXT | --prompt-file F)\n"
         "                      [--steps N --temperature T --top-p P --seed S] [--chat [--system TEXT]]\n"
         "                      [--policy SPEC --budget N] [--device cpu|cuda|auto] --out trace.h5\n"
         "       kvscope info (MODEL [--tokenizer PATH] | trace.h5) [--json]\n"
         "       kvscope simulate trace.h5 --policy NAME[:key=value,...] [--policy ...] --budget N\n"
         "       kvscope layers trace.h5 [--filters K] [--given 2,8,18] [--json]\n"
         "       kvscope heads (trace.h5 | --model M [trace.h5]) [--alpha-out DIR] [--json]\n"
         "       kvscope rerun trace.h5 --policy SPEC [--policy ...] --budget N [--mode forced|free]\n"
         "                     [--device cpu|cuda|auto]\n"
         "       kvscope compare A.h5 B.h5 [--tol T] [--json]\n"
         "       kvscope tokenize (MODEL [--tokenizer PATH] | --tokenizer PATH) (--text TEXT | --text-file F)\n"
         "                        [--chat [--system TEXT]] [--no-bos] [--json]\n"
         "Every flag of a command: kvscope help COMMAND (or kvscope COMMAND --help).\n";
}

const char* command_help(const std::string& command) {
  static const std::map<std::string, const char*> kHelp = {
      {"gui",
       "usage: kvscope [gui] [trace.h5] [flags]        the desktop app (no arguments: the app alone)\n"
       "  --screenshot out.png   render headless (under xvfb-run), write the PNG and exit\n"
       "  --view NAME            what to render: all, run, timeline, lanes, attention, heads, layers,\n"
       "                         metrics, compare (default: the whole window)\n"
       "  --step N               decode step to show, from 0 (default: where the app opens)\n"
       "  --size WxH             window size, 64x64 .. 8192x8192 (default 1600x1000)\n"
       "  --script S             commands run before the picture, separated by ';' (docs/gui.md)\n"
       "  --text-size PX         text size in pixels, 10 .. 40 (default: the last one chosen in\n"
       "                         View > Text size, else 15 times the monitor's scale; 15 in a picture)\n"
       "  --model PATH           model for the Run view (default: SmolLM2 when fetched, else a test model in ../shared/models)\n"},
      {"record",
       "usage: kvscope record [--model PATH] (--prompt TEXT | --prompt-file F) --out trace.h5 [flags]\n"
       "Generates from a prompt and records its attention into an HDF5 trace; prints the prompt\n"
       "and the generated text.\n"
       "  --model PATH              llama2.c .bin, GGUF, or a Hugging Face folder (default:\n"
       "                            SmolLM2-135M-Instruct, once scripts/fetch-model.sh fetched it)\n"
       "  --tokenizer PATH          tokenizer.bin (llama2.c), tokenizer.json or a SentencePiece .model;\n"
       "                            default: the model's own\n"
       "  --prompt TEXT | --prompt-file F\n"
       "                            the prompt, or a UTF-8 file holding it (its byte-order mark and\n"
       "                            line breaks at the end are not part of it, as a shell's $(cat F))\n"
       "  --chat                    wrap the prompt in the model's chat format: its chat template\n"
       "                            rendered as transformers renders it (one user turn, the\n"
       "                            generation prompt), else its family's fixed format\n"
       "  --system TEXT             with --chat: a system turn before the prompt (rendered\n"
       "                            templates only)\n"
       "  --steps N                 tokens to generate (default 64)\n"
       "  --temperature T           0 = greedy (default 0)\n"
       "  --top-p P                 nucleus sampling, 0 < P <= 1 (default 1)\n"
       "  --seed S                  sampling seed (default 42)\n"
       "  --policy SPEC --budget N  generate under an eviction policy (see kvscope help simulate;\n"
       "                            no --budget for full, budget=N or omnikv's frac=F)\n"
       "  --decode-dtype T          float32 (default, what policies score from) or float16 (half the size)\n"
       "  --capture-budget-mb N     keep the full prefill map when it fits N MiB (default 256);\n"
       "                            above it: column sums, the last 64 rows and a pooled overview\n"
       "  --threads N               CPU threads (default: all cores)\n"
       "  --device cpu|cuda|auto    default auto: the GPU when this build and machine can use it\n"
       "  --gpu-dtype auto|fp16|bf16|fp32  what the GPU stores weights and KV cache in; fp32: the\n"
       "                            CPU's attention rows to about 1e-5, twice the memory (default\n"
       "                            auto: fp32 for models up to 268M weights, else bf16 for\n"
       "                            checkpoints stored in bf16, fp16 for the rest)\n"
       "  --kv-dtype fp32|fp16|bf16  what the CPU stores the KV cache in (default fp32); fp16 and bf16\n"
       "                            take half the memory and read faster at long contexts, rows move\n"
       "                            by up to about 5e-3 (fp16) or 5e-2 (bf16)\n"
       "  --quiet                   print nothing but errors\n"
       "Ctrl-C stops generating and keeps the steps done so far; during the prompt (or, with\n"
       "--policy, the full-cache reference run before it) it stops at the next layer or step and\n"
       "writes nothing.\n"},
      {"info",
       "usage: kvscope info (MODEL | trace.h5) [--tokenizer PATH] [--json]\n"
       "Describes a model (format, shape, weights, tokenizer) or a trace (model, shape, steps,\n"
       "capture, runs).\n"
       "  --tokenizer PATH   tokenizer for a model that does not carry its own\n"
       "  --json             one JSON object instead of text\n"},
      {"compare",
       "usage: kvscope compare A.h5 B.h5 [--tol T] [--json]\n"
       "Two traces of one model and prompt (recorded on the CPU and the GPU, in fp16 and fp32, before\n"
       "and after a change): where each ran, whether their tokens agree, and how far their decode\n"
       "attention rows are apart, step by step while both fed the same tokens: the largest\n"
       "difference and where, and the share of rows within T.\n"
       "  --tol T            a row is within when its largest difference is at most T (default 1e-3)\n"
       "  --json             one JSON object instead of text (tokens_differ_at: the first position\n"
       "                     whose tokens differ, the shorter trace's length where the longer one\n"
       "                     continues it, null where they are the same)\n"},
      {"simulate",
       "usage: kvscope simulate trace.h5 --policy SPEC [--policy SPEC ...] --budget N [flags]\n"
       "Replays each policy over the trace's recorded attention and adds its run to the trace.\n"
       "  --policy SPEC      NAME[:key=value,...]; NAME one of full, window, streamingllm, strided,\n"
       "                     h2o, tova, snapkv, pyramidkv, adakv, kvzip, duoattention, omnikv\n"
       "                     (keys and defaults: docs/policies.md)\n"
       "  --budget N         tokens kept per head, 1..2^30 (required unless every policy is full\n"
       "                     or gives its own: budget=N, or omnikv's frac=F of the prompt)\n"
       "  --alpha DIR        DuoAttention pattern folder (full_attention_heads.tsv + config), as\n"
       "                     duoattention:pattern=DIR\n"
       "  --model PATH       model for kvzip's scores when the trace has none (default: the trace's)\n"
       "  --tokenizer PATH   its tokenizer\n"
       "  --block-size N     paged-allocation block for the freed-bytes metric (default 16)\n"
       "  --threads N        CPU threads for kvzip's scoring (default: all cores)\n"
       "  --json             run summaries as JSON\n"},
      {"layers",
       "usage: kvscope layers trace.h5 [flags]\n"
       "OmniKV's inter-layer attention similarity and the filter layers that retain the most mass.\n"
       "  --filters K        filter layers to choose (default: a tenth of the layers, at least 1)\n"
       "  --wait W           dense layers after each filter (default 1)\n"
       "  --given 2,8,18     also score this choice of filter layers\n"
       "  --k N              top-k prompt keys per layer for the similarity, at most the prompt\n"
       "                     (default or 0: 6.7% of the prompt)\n"
       "  --recompute        recompute the similarity even when the trace stores it\n"
       "  --json             the matrix (a flat list of L x L values, row by row) and plans as JSON\n"},
      {"heads",
       "usage: kvscope heads (trace.h5 | --model PATH [trace.h5]) [flags]\n"
       "Per-head sink mass, locality, entropy and DuoAttention alpha: from a trace, or estimated on\n"
       "the model with retrieval-head scores.\n"
       "  --model PATH       estimate on the model instead of a trace; with a trace of that model,\n"
       "                     store alpha and the retrieval scores in it (/heads/alpha, /heads/retrieval_score:\n"
       "                     DuoAttention runs on the trace and the app's head grid use them)\n"
       "  --tokenizer PATH   its tokenizer\n"
       "  --sink N           sink tokens (default 4)\n"
       "  --recent N         recent tokens of alpha's streaming window (default 32; locality is always\n"
       "                     the mass on the last 32 keys)\n"
       "  --alpha-out DIR    write a DuoAttention pattern folder\n"
       "  --threads N        CPU threads (default: all cores)\n"
       "  --json             per-head statistics as JSON (each a flat list of L x H values, layer by\n"
       "                     layer; KV heads for per-KV-head ones)\n"},
      {"rerun",
       "usage: kvscope rerun trace.h5 --policy SPEC [--policy SPEC ...] --budget N [flags]\n"
       "Runs the model again with each policy evicting for real and adds the runs to the trace.\n"
       "  --policy SPEC      as for simulate (kvscope help simulate)\n"
       "  --budget N         tokens kept per head, 1..2^30 (required unless every policy is full\n"
       "                     or gives its own: budget=N, or omnikv's frac=F of the prompt)\n"
       "  --mode forced|free forced (default): the trace's tokens fed, logits compared step by step;\n"
       "                     free: each policy writes its own continuation\n"
       "  --model PATH       default: the trace's model path\n"
       "  --tokenizer PATH   default: the trace's tokenizer\n"
       "  --alpha DIR        DuoAttention pattern folder, as duoattention:pattern=DIR\n"
       "  --rope-in-cache    StreamingLLM's positions inside the cache (runs named *_rerotated)\n"
       "  --no-attention     do not keep the runs' attention rows\n"
       "  --attention-budget-mb N  keep them only when all runs' rows fit N MiB (default 1024;\n"
       "                     a run's are steps x layers x heads x tokens x 4 bytes, held until appended)\n"
       "  --threads N        CPU threads (default: all cores)\n"
       "  --device cpu|cuda|auto    default auto, as for record: the GPU when this build and machine can use it\n"
       "  --gpu-dtype auto|fp16|bf16|fp32  the GPU's weights and KV cache (default auto, as for record)\n"
       "  --kv-dtype fp32|fp16|bf16  the CPU's KV cache (default fp32, as for record)\n"
       "  --json             run summaries as JSON\n"
       "Ctrl-C stops at the next layer or step and leaves the trace as it was.\n"},
      {"tokenize",
       "usage: kvscope tokenize (MODEL [--tokenizer PATH] | --tokenizer PATH) (--text TEXT | --text-file F)\n"
       "                        [flags]\n"
       "A text's tokens, one line each: position, id and text (quoted, with \\n, \\t, \\xNN escapes;\n"
       "unquoted: a special token, e.g. <s>, which decodes to no text), then their count. With a model,\n"
       "the tokens a recording of that prompt starts with (the trace's /tokens/ids): the tokenizer\n"
       "record chooses, BOS where it adds one, the same chat format; its weights are not read.\n"
       "  MODEL              llama2.c .bin, GGUF, or a Hugging Face folder\n"
       "  --tokenizer PATH   with MODEL: as for record; alone: that tokenizer file only (tokenizer.json\n"
       "                     or a folder holding one, a SentencePiece .model, a GGUF file, a vocab-only\n"
       "                     one included, or a llama2.c tokenizer.bin)\n"
       "  --text TEXT | --text-file F\n"
       "                     the text, or a UTF-8 file holding it (read as record reads a prompt file:\n"
       "                     its byte-order mark and line breaks at the end are not part of it);\n"
       "                     --text again for more texts, each encoded on its own, in turn\n"
       "  --chat             wrap the text in the chat format (the model's; a tokenizer alone: its\n"
       "                     GGUF's chat template, or tokenizer_config.json beside tokenizer.json)\n"
       "  --system TEXT      with --chat: a system turn before each text\n"
       "  --no-bos           leave out the BOS the tokenizer adds (record always adds it)\n"
       "  --json             one JSON object a text, each on one line: tokenizer (its kind), vocab_size,\n"
       "                     bos_added, chat (\"template\" where the chat template was rendered,\n"
       "                     else the fixed format's family, or null), text (as encoded, chat format\n"
       "                     included), n_tokens, ids, pieces (each token's text as a trace's\n"
       "                     /tokens/text holds it) and special (true for a special token)\n"},
  };
  const auto it = kHelp.find(command);
  return it == kHelp.end() ? nullptr : it->second;
}

}  // namespace kvs
