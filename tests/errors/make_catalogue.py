#!/usr/bin/env python3
"""Writes docs/errors.md: every user-facing error of `attnres` with an example input and the exact
message, produced by running the real binary. tests/cli/test_error_catalogue.cpp reads the same
document back and checks every entry, so the catalogue cannot drift from the program.

    python3 tests/errors/make_catalogue.py build/ci/app/cli/attnres > docs/errors.md
"""
import os, shlex, shutil, struct, subprocess, sys, tempfile, json

ATTNRES = os.path.abspath(sys.argv[1])

FILES = {
    "syntax.toml": "[model]\nsublayers = = 8\n",
    "type.toml": "[model]\nsublayers = \"many\"\nd_model = 16\nblocks = 2\n",
    "key.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[sequence]\ntoken = 4096\n",
    "blocks.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 12\n",
    "zero.toml": "[model]\nsublayers = 8\nd_model = 0\nblocks = 2\n",
    "chunks.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[parallel]\npp = 4\nvpp = 4\n",
    "overflow.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[sequence]\ntokens = 1000000000\nbatch = 1000000000\n",
    "metric.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[[sweep]]\nname = \"s\"\nx = \"blocks\"\nvalues = [1, 2]\nmetrics = [\"io_multiples_of_d.mch\"]\n",
    "units.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[[sweep]]\nname = \"s\"\nx = \"blocks\"\nvalues = [1, 2]\nmetrics = [\"io_multiples_of_d.mhc\", \"prefill_history_gb.total\"]\n",
    "nohardware.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[pipeline]\nmicrobatches = 8\n",
    "preset.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[hardware]\npreset = \"h1000\"\n",
    "gpu.toml": "name = \"my GPU\"\npeak_bf16_flops = 1e15\n",
    "clash.toml": "sections = [\"io\"]\n[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[[sweep]]\nname = \"io\"\nx = \"blocks\"\nvalues = [1, 2]\nmetrics = [\"io_multiples_of_d.mhc\"]\n",
    "points.toml": "[[point]]\nid = \"x\"\nsource = \"s\"\nmeasured_text = \"1 us\"\nquantity = \"call_seconds\"\nmeasured = 1e-6\nhardware = \"h100\"\ncall = \"fused\"\nsources = 9\nd_model = 16\n",
    "blocklist.toml": "[model]\nsublayers = 8\nd_model = 16\nblock_sizes = [4, 3]\n",
    "nohw-strategies.toml": "sections = [\"strategies\"]\n[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n",
    "longname.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[[sweep]]\nname = \"" + "a" * 201 + "\"\nx = \"blocks\"\nvalues = [1, 2]\nmetrics = [\"io_multiples_of_d.mhc\"]\n",
    "layers.toml": "sections = [\"io\"]\n[model]\nsublayers = 8\nd_model = 16\nblock_layers = 5\n",
    "ok.toml": "sections = [\"io\"]\n[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n",
    "mine/notes.txt": "my notes\n",
    "text.txt": "the cat sat on the mat. " * 20 + "\n",
    "empty.txt": "",
    "untrained.toml": "sections = [\"io\"]\n[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[train]\ndata = \"text.txt\"\nlayers = 2\nd_model = 16\nheads = 2\nblocks = [2]\n",
    "overlay.toml": "[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n[[sweep]]\nname = \"s\"\nx = \"blocks\"\nvalues = [1, 2]\nmetrics = [\"io_multiples_of_d.mhc\"]\noverlay = \"band\"\n",
    "k3-mean/config.json": '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 24, "vocab_size": 20, "rms_norm_eps": 1e-06, "attn_res_block_size": 1, "attn_res_block_reduce": "mean"}\n',
    "k3-key/config.json": '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 24, "vocab_size": 20, "rms_norm_eps": 1e-06, "attn_res_block_size": 1, "attn_res_gate": "sigmoid"}\n',
    "k3-index/config.json": '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 24, "vocab_size": 20, "rms_norm_eps": 1e-06, "attn_res_block_size": 1}\n',
    "k3-index/model.safetensors.index.json": '{"metadata": {"total_size": 64},\n "weight_map": {\n  "model.norm.weight": "model-00001-of-00002.safetensors",\n',
    # Hostile files (docs/output-safety.md, "Reading files"): JSON nested too deep, a key twice.
    "m-deep/config.json": '{"hidden_size": ' + "[" * 100 + "]" * 100 + "}\n",
    "m-dup/config.json": '{"hidden_size": 16,\n "hidden_size": 32}\n',
    # Training states (train_state.json) whose recorded data file changed or is gone.
    "ck/train_state.json": '{"format": "attnres-train-state", "version": 2, "step": 2, "tokens": 16, "options": {"steps": 4, "sequence_length": 8, "batch": 1, "lr": 0.003, "min_lr_ratio": 0.1, "warmup": 0, "beta1": 0.9, "beta2": 0.95, "eps": 1e-08, "weight_decay": 0.1, "clip": 1.0, "seed": 0, "eval_every": 2, "eval_sequences": 2, "validation_fraction": 0.05, "engine": "fast", "threads": 1, "precision": "f32", "zero_placeholder": false}, "data": {"path": "text.txt", "train_bytes": 457, "validation_bytes": 24, "fnv1a64": "1"}}\n',
    "ck-v1/train_state.json": '{"format": "attnres-train-state", "version": 1, "step": 2, "tokens": 16, "options": {"steps": 4, "sequence_length": 8, "batch": 1, "lr": 0.003, "min_lr_ratio": 0.1, "warmup": 0, "beta1": 0.9, "beta2": 0.95, "eps": 1e-08, "weight_decay": 0.1, "clip": 1.0, "seed": 0, "eval_every": 2, "eval_sequences": 2, "validation_fraction": 0.05, "engine": "fast", "threads": 1, "precision": "f32", "zero_placeholder": false}, "data": {"path": "text.txt", "train_bytes": 457, "validation_bytes": 24, "fnv1a64": "1"}}\n',
    "ck-moved/train_state.json": '{"format": "attnres-train-state", "version": 2, "step": 2, "tokens": 16, "options": {"steps": 4, "sequence_length": 8, "batch": 1, "lr": 0.003, "min_lr_ratio": 0.1, "warmup": 0, "beta1": 0.9, "beta2": 0.95, "eps": 1e-08, "weight_decay": 0.1, "clip": 1.0, "seed": 0, "eval_every": 2, "eval_sequences": 2, "validation_fraction": 0.05, "engine": "fast", "threads": 1, "precision": "f32", "zero_placeholder": false}, "data": {"path": "moved.txt", "train_bytes": 457, "validation_bytes": 24, "fnv1a64": "1"}}\n',
    "train.toml": "sections = [\"training\"]\n[train]\ndata = \"text.txt\"\nlayers = 2\nd_model = 16\nheads = 2\nblocks = [3]\n",
}

# A config.json whose key holds an invalid UTF-8 byte and a terminal escape sequence.
HOSTILE_CONFIG = b'{"hidden_size\xff\x1b[31m": 16}\n'

# (section, title, command, fixture note)
CASES = [
    ("Command line", "Unknown command", "attnres frobnicate", ""),
    ("Command line", "Unknown flag", "attnres forward --model m --tokens 1 --colour red", ""),
    ("Command line", "Missing required flag", "attnres forward --tokens 1", ""),
    ("Command line", "Misspelt command", "attnres reprot ok.toml --out r", "ok.toml"),
    ("Command line", "Misspelt flag", "attnres cost --sublayer 8 --blocks 2 --d-model 16", ""),
    ("Command line", "Abbreviated flag (flags are never guessed from a prefix)", "attnres cost --sub 8 --blocks 2 --d-model 16", ""),
    ("Command line", "Token list not quoted (a stray argument)", "attnres forward --model m --tokens 1 7 12", "m"),
    ("Command line", "Malformed flag value", "attnres init-model --layers two --d-model 16 --heads 4 --ffn 24 --vocab 20 --out x", ""),
    ("init-model", "Heads do not divide the width", "attnres init-model --layers 2 --d-model 16 --heads 3 --ffn 24 --vocab 20 --out x", ""),
    ("init-model", "Key/value heads do not divide the heads", "attnres init-model --layers 2 --d-model 16 --heads 4 --kv-heads 3 --ffn 24 --vocab 20 --out x", ""),
    ("init-model", "Zero layers", "attnres init-model --layers 0 --d-model 16 --heads 4 --ffn 24 --vocab 20 --out x", ""),
    ("init-model", "Block mode without a block size", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --mode block --out x", ""),
    ("init-model", "Block size larger than L", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --mode block --block-size 5 --out x", ""),
    ("init-model", "Block size with another mode", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --block-size 2 --out x", ""),
    ("init-model", "Output directory holding other files", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --out mine", "mine/notes.txt"),
    ("init-model", "Unknown residual mode", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --mode sideways --out x", ""),
    ("init-model", "Depth window outside Full AttnRes", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --mode block --block-size 2 --window 4 --out x", ""),
    ("init-model", "Depth heads that do not divide d", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --mode full --depth-heads 3 --out x", ""),
    ("init-model", "mHC without streams", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --mode mhc --streams 0 --out x", ""),
    ("init-model", "Unknown depth gate", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --mode full --gate relu --out x", ""),
    ("init-model", "Infinite weight standard deviation", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --weight-std inf --out x", ""),
    ("forward", "Token id outside the vocabulary", "attnres forward --model m --tokens '1 25'", "m"),
    ("forward", "Token that is not a number", "attnres forward --model m --tokens '1 x'", "m"),
    ("forward", "Empty token id", "attnres forward --model m --tokens 1,,2", "m"),
    ("forward", "Block size with the standard residual", "attnres forward --model m --tokens 1 --block-size 2", "m"),
    ("forward", "Zero placeholder outside Block AttnRes", "attnres forward --model m --tokens 1 --mode full --zero-placeholder", "m"),
    ("forward", "--two-phase with the standard residual", "attnres forward --model m --tokens 1 --two-phase off", "m"),
    ("forward", "Schedule block larger than L", "attnres forward --model m --tokens 1 --mode full --schedule-block 5", "m"),
    ("forward", "Dump over the model's own file", "attnres forward --model m --tokens 1 --dump m/model.safetensors", "m"),
    ("forward", "Unknown engine", "attnres forward --model m --tokens 1 --engine quick", "m"),
    ("forward", "Negative thread count", "attnres forward --model m --tokens 1 --threads -1", "m"),
    ("forward", "The CUDA engine in f64", "attnres forward --model m --tokens 1 --device cuda --precision f64", "m"),
    ("forward", "Block size zero", "attnres forward --model m --tokens 1 --mode block --block-size 0", "m"),
    ("forward", "Block mode without a block size", "attnres forward --model m --tokens 1 --mode block", "m"),
    ("forward", "Bad --two-phase value", "attnres forward --model m --tokens 1 --two-phase maybe", "m"),
    ("forward", "Bad --precision value", "attnres forward --model m --tokens 1 --precision f16", "m"),
    ("forward", "bf16 on the reference engine", "attnres forward --model m --tokens 1 --precision bf16 --engine reference", "m"),
    ("forward", "bf16 on the CUDA engine", "attnres forward --model m --tokens 1 --precision bf16 --device cuda", "m"),
    ("forward", "Output directory missing", "attnres forward --model m --tokens 1 --dump nowhere/out.safetensors", "m"),
    ("forward", "--grad with a single token", "attnres forward --model m --tokens 1 --grad", "m"),
    ("forward", "Chart directory holding other files", "attnres forward --model m --tokens 1 --chart mine", "mine/notes.txt"),
    ("forward", "Chart directory that cannot be made", "attnres forward --model m --tokens 1 --chart ok.toml/charts", "ok.toml"),
    ("forward", "--force without --chart", "attnres forward --model m --tokens 1 --force", "m"),
    ("train", "Empty data file", "attnres train --layers 1 --d-model 16 --heads 2 --ffn 24 --data empty.txt --steps 2 --seq 8 --batch 1 --out t", "empty.txt"),
    ("train", "Binary data file", "attnres train --layers 1 --d-model 16 --heads 2 --ffn 24 --data binary.bin --steps 2 --seq 8 --batch 1 --out t", "binary.bin"),
    ("train", "Data file too short for the sequence length", "attnres train --layers 1 --d-model 16 --heads 2 --ffn 24 --data text.txt --steps 2 --seq 400 --batch 1 --out t", "text.txt"),
    ("train", "Vocabulary smaller than 256 (byte tokens)", "attnres train --model m --data text.txt --steps 2 --seq 8 --batch 1 --out t", "m"),
    ("train", "Training in f64", "attnres train --layers 1 --d-model 16 --heads 2 --ffn 24 --data text.txt --steps 2 --seq 8 --batch 1 --precision f64 --out t", "text.txt"),
    ("train", "Negative gradient clipping threshold", "attnres train --layers 1 --d-model 16 --heads 2 --ffn 24 --data text.txt --steps 2 --seq 8 --batch 1 --clip -1 --out t", "text.txt"),
    ("train", "Zero steps", "attnres train --layers 1 --d-model 16 --heads 2 --ffn 24 --data text.txt --steps 0 --seq 8 --batch 1 --out t", "text.txt"),
    ("train", "No model given", "attnres train --data text.txt --steps 2 --seq 8 --batch 1 --out t", "text.txt"),
    ("train", "Changing a setting of a resumed run", "attnres train --data text.txt --resume t --out t --lr 0.1", "text.txt"),
    ("train", "Resuming from a directory that is not a checkpoint", "attnres train --data text.txt --resume mine --out t", "mine/notes.txt"),
    ("train", "Output directory holding other files", "attnres train --layers 1 --d-model 16 --heads 2 --ffn 24 --data text.txt --steps 2 --seq 8 --batch 1 --out mine", "mine/notes.txt"),
    ("mask", "Unknown mask", "attnres mask --model m --data text.txt --drop everything", "m"),
    ("mask", "A model whose vocabulary is smaller than 256 (byte tokens)", "attnres mask --model m --data text.txt --drop embedding --seq 8", "m"),
    ("read", "Token position outside the sequence", "attnres read --model m --tokens '1 2 3' --token 3 --read 1", "m"),
    ("read", "Read outside 0 .. L", "attnres read --model m --tokens '1 2 3' --token 0 --read 5", "m"),
    ("read", "Sublayer outside 1 .. L", "attnres read --model m --tokens '1 2 3' --token 0 --sublayer 0", "m"),
    ("read", "No read given", "attnres read --model m --tokens '1 2 3' --token 0", "m"),
    ("read", "Both --read and --sublayer", "attnres read --model m --tokens '1 2 3' --token 0 --read 1 --sublayer 2", "m"),
    ("read", "A mode without a step-by-step read", "attnres read --model m --tokens '1 2 3' --token 0 --read 1 --mode mhc", "m"),
    ("animate", "Unknown sweep", "attnres animate --sweep sideways --out a", ""),
    ("animate", "Fewer than two frames", "attnres animate --sweep query-std --frames 1 --out a", ""),
    ("animate", "--frames with the block-size sweep (one frame per S)", "attnres animate --sweep block-size --frames 5 --out a", ""),
    ("animate", "An empty query-std range", "attnres animate --sweep query-std --from 2 --to 1 --out a", ""),
    ("animate", "A random-model flag with --model", "attnres animate --sweep block-size --model m --tokens 1 --seed 2 --out a", "m"),
    ("animate", "The query-std sweep on a model without pseudo-queries", "attnres animate --sweep query-std --model m --tokens '1 2' --out a", "m"),
    ("animate", "Output directory holding other files", "attnres animate --sweep block-size --out mine", "mine/notes.txt"),
    ("bench", "Unknown benchmark", "attnres bench backward --model m --seq 8", "m"),
    ("bench", "Training benchmark with one token per sequence", "attnres bench train --model m --seq 1", "m"),
    ("bench", "Zero tokens per pass", "attnres bench forward --model m --seq 0", "m"),
    ("Model files", "Model directory missing", "attnres forward --model absent --tokens 1", ""),
    ("Model files", "Truncated safetensors file", "attnres forward --model m-truncated --tokens 1", "m-truncated"),
    ("Model files", "NaN in the weights", "attnres forward --model m-nan --tokens 1", "m-nan"),
    ("Model files", "Required tensor missing", "attnres forward --model m-missing --tokens 1", "m-missing"),
    ("Model files", "config.json with hostile bytes (shown escaped)", "attnres forward --model m-hostile --tokens 1", "m-hostile"),
    ("Model files", "config.json is not JSON", "attnres forward --model m-badjson --tokens 1", "m-badjson"),
    ("Model files", "A port's declared deviation from the paper (block summaries averaged)", "attnres inspect k3-mean", "k3-mean/config.json"),
    ("Model files", "An AttnRes config key the lab does not know", "attnres inspect k3-key", "k3-key/config.json"),
    ("Model files", "A shard index cut short", "attnres inspect k3-index", "k3-index/config.json + k3-index/model.safetensors.index.json"),
    ("export", "--dtype with the lab's layout", "attnres export --model m --out x --format lab --dtype bf16", "m"),
    ("export", "A scheme the Kimi K3 layout cannot hold", "attnres init-model --layers 2 --d-model 16 --heads 4 --ffn 24 --vocab 20 --mode full --format hf --out x", ""),
    ("inspect", "--max-tokens without a text", "attnres inspect m --max-tokens 5", "m"),
    ("inspect", "A text and token ids at once", "attnres inspect m --text text.txt --tokens 1", "m, text.txt"),
    ("cost", "More blocks than sublayers", "attnres cost --sublayers 8 --blocks 9 --d-model 16", ""),
    ("cost", "More pipeline chunks than sublayers", "attnres cost --sublayers 8 --blocks 2 --d-model 16 --pp 4 --vpp 4", ""),
    ("cost", "Sizes whose product overflows 64 bits", "attnres cost --sublayers 8 --blocks 2 --d-model 16 --seq 1000000000 --batch 1000000000", ""),
    ("cost", "MLA width beyond its bound", "attnres cost --sublayers 8 --blocks 2 --d-model 16 --attention mla --rope-dim 9223372036854775807", ""),
    ("cost", "Negative size", "attnres cost --sublayers=-8 --blocks 2 --d-model 16", ""),
    ("cost", "Unknown dtype", "attnres cost --sublayers 8 --blocks 2 --d-model 16 --dtype int4", ""),
    ("cost", "Unknown scheme name", "attnres cost --sublayers 8 --blocks 2 --d-model 16 --scheme blok", ""),
    ("cost", "Scheme key that does not fit the mode", "attnres cost --sublayers 8 --blocks 2 --d-model 16 --scheme block --window 4", ""),
    ("cost", "Unknown output format", "attnres cost --sublayers 8 --blocks 2 --d-model 16 --format xml", ""),
    ("cost", "Block sizes that do not sum to L", "attnres cost --sublayers 8 --block-sizes 4,3 --d-model 16", ""),
    ("cost", "A block list and a block count together", "attnres cost --sublayers 8 --block-sizes 4,4 --blocks 4 --d-model 16", ""),
    ("cost", "Layers per block beyond the model", "attnres cost --layers 4 --block-layers 5 --d-model 16", ""),
    ("strategies", "Unknown implementation strategy", "attnres strategies --sublayers 8 --blocks 2 --d-model 16 --calls stak", ""),
    ("strategies", "A mode without depth reads", "attnres strategies --sublayers 8 --blocks 2 --d-model 16 --mode mhc", ""),
    ("strategies", "A scheme without reads over a stored history", "attnres strategies --sublayers 8 --blocks 2 --d-model 16 --scheme rescaled", ""),
    ("layout", "A block list that is not a list of integers", "attnres layout --sublayers 8 --block-sizes 4,x --d-model 16", ""),
    ("recompute", "Unknown strategy", "attnres recompute --sublayers 8 --blocks 2 --d-model 16 --strategy fused", ""),
    ("calibrate", "Malformed calibration table", "attnres calibrate --table points.toml", "points.toml"),
    ("calibrate", "Measurement flag without --measure", "attnres calibrate --quick", ""),
    ("calibrate", "Malformed --measure shape", "attnres calibrate --measure --shape 64,64,8", ""),
    ("calibrate", "Block count that does not divide L", "attnres calibrate --measure --shape 64,64,8,3", ""),
    ("calibrate", "Preset file that cannot be written", "attnres calibrate --measure --quick --write-hardware missing/here.toml", ""),
    ("sweep", "Unknown metric", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,2 --metric io_multiples_of_d.blok_two_phase", ""),
    ("sweep", "Unknown parameter", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocs --values 1,2 --metric io_multiples_of_d.mhc", ""),
    ("sweep", "Malformed values", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1:x --metric io_multiples_of_d.mhc", ""),
    ("sweep", "--format together with --out", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,2 --metric io_multiples_of_d.mhc --format json --out s", ""),
    ("sweep", "--name with a path separator", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,2 --metric io_multiples_of_d.mhc --name ../io --out s", ""),
    ("sweep", "--y-values without --y", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,2 --y-values 1,2 --metric io_multiples_of_d.mhc", ""),
    ("sweep", "Grid larger than the limit", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x d_model --values 1:3000 --y tokens --y-values 1:1000 --metric io_multiples_of_d.mhc", ""),
    ("sweep", "Output directory holding other files", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,2 --metric io_multiples_of_d.mhc --out mine", "mine/notes.txt"),
    ("sweep", "--overlay without a chart", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,2 --metric io_multiples_of_d.mhc --overlay published_band", ""),
    ("sweep", "--overlay over a parameter other than N or S", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x tokens --values 1,2 --metric io_multiples_of_d.mhc --overlay published_band --out s", ""),
    ("scaling", "Non-positive target loss", "attnres scaling --target-loss 0", ""),
    ("scaling", "Target loss without a finite compute", "attnres scaling --target-loss 1e308", ""),
    ("evidence", "N beyond the depth", "attnres evidence --sublayers 32 --blocks 64", ""),
    ("evidence", "Both --sublayers and --layers", "attnres evidence --sublayers 32 --layers 16", ""),
    ("report", "Unknown overlay in a scenario sweep", "attnres report overlay.toml --out r", "overlay.toml"),
    ("pipeline", "Micro-batches not a multiple of P (interleaved)", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --pp 2 --vpp 2 --microbatches 3", ""),
    ("pipeline", "1F1B with virtual stages", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --pp 2 --vpp 2 --schedule 1f1b", ""),
    ("pipeline", "Zero micro-batches", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --microbatches 0", ""),
    ("pipeline", "Zero link bandwidth", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --pp 2 --link-bandwidth 0", ""),
    ("pipeline", "MoE flag without --experts", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --active-experts 8", ""),
    ("pipeline", "--link-bandwidth with --ideal-links", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --pp 2 --link-bandwidth 50 --ideal-links", ""),
    ("pipeline", "Hardware preset in the wrong case", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --hardware H100", ""),
    ("pipeline", "Unknown hardware preset", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --hardware h1000", ""),
    ("pipeline", "Malformed hardware file", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --hardware gpu.toml", "gpu.toml"),
    ("Scenario files", "TOML syntax error", "attnres report syntax.toml --out r", "syntax.toml"),
    ("Scenario files", "Wrong type", "attnres report type.toml --out r", "type.toml"),
    ("Scenario files", "Unknown key", "attnres report key.toml --out r", "key.toml"),
    ("Scenario files", "More blocks than sublayers", "attnres report blocks.toml --out r", "blocks.toml"),
    ("Scenario files", "Zero width", "attnres report zero.toml --out r", "zero.toml"),
    ("Scenario files", "More pipeline chunks than sublayers", "attnres report chunks.toml --out r", "chunks.toml"),
    ("Scenario files", "Sizes whose product overflows 64 bits", "attnres report overflow.toml --out r", "overflow.toml"),
    ("Scenario files", "Unknown metric in a sweep", "attnres report metric.toml --out r", "metric.toml"),
    ("Scenario files", "Metrics of different units in one sweep", "attnres report units.toml --out r", "units.toml"),
    ("Scenario files", "[pipeline] without [hardware]", "attnres report nohardware.toml --out r", "nohardware.toml"),
    ("Scenario files", "Block sizes that do not sum to L", "attnres report blocklist.toml --out r", "blocklist.toml"),
    ("Scenario files", "strategies section without [hardware]", "attnres report nohw-strategies.toml --out r", "nohw-strategies.toml"),
    ("Scenario files", "Unknown hardware preset", "attnres report preset.toml --out r", "preset.toml"),
    ("Scenario files", "Sweep named like one of the report's own tables", "attnres report clash.toml --out r", "clash.toml"),
    ("Scenario files", "Report into a directory holding other files", "attnres report ok.toml --out mine", "mine/notes.txt"),
    ("Scenario files", "Scenario file missing", "attnres report none.toml --out r", ""),
    ("Scenario files", "[train] block count that does not divide L", "attnres report train.toml --out r", "train.toml"),
    ("Scenario files", "--train-steps without a [train] table", "attnres report ok.toml --out r --train-steps 3", "ok.toml"),
    ("Limits", "More threads than the bound", "attnres forward --model m --tokens 1 --threads 5000", "m"),
    ("Limits", "More threads than the bound (bench)", "attnres bench forward --model m --seq 16 --threads 5000", "m"),
    ("Limits", "A data file that is a device", "attnres mask --model m --data /dev/zero --drop embedding", "m"),
    ("Limits", "A data file that is a directory", "attnres train --model m --data m --steps 1 --seq 8 --batch 1 --out t", "m"),
    ("Limits", "More sublayers than the cost engine counts", "attnres cost --sublayers 9223372036854775807 --blocks 8 --d-model 16", ""),
    ("Limits", "More sublayers than layout lists", "attnres layout --sublayers 1000000000 --blocks 8 --d-model 16", ""),
    ("Limits", "More micro-batches x chunks than the simulation places", "attnres pipeline --layers 32 --block-size 8 --d-model 1024 --pp 16 --vpp 2 --microbatches 1000000", ""),
    ("Limits", "A block list ending in a comma", "attnres cost --sublayers 8 --block-sizes 4,4, --d-model 16", ""),
    ("Limits", "A scheme block size of 0", "attnres cost --sublayers 8 --blocks 2 --d-model 16 --scheme block:block_size=0", ""),
    ("Limits", "A sweep name longer than 200 characters", "attnres report longname.toml --out r", "longname.toml"),
    ("Limits", "More sublayers than strategies lists", "attnres strategies --layers 500000 --blocks 8 --d-model 1024", ""),
    ("Before the work", "Training output under a regular file (refused before step 1)", "attnres train --layers 1 --d-model 16 --heads 2 --ffn 24 --data text.txt --steps 600 --seq 8 --batch 1 --out ok.toml/run", "ok.toml"),
    ("Before the work", "Training output that cannot be created", "attnres train --layers 1 --d-model 16 --heads 2 --ffn 24 --data text.txt --steps 600 --seq 8 --batch 1 --out /proc/x/run", "text.txt"),
    ("Before the work", "Dump into a folder that cannot be written (refused before the pass)", "attnres forward --model m --tokens 1 --dump /proc/x.safetensors", "m"),
    ("Before the work", "Trace over a directory", "attnres forward --model m --tokens 1 --trace mine", "mine/notes.txt"),
    ("Before the work", "A flag strategies does not use", "attnres strategies --sublayers 8 --blocks 2 --d-model 16 --pp 8 --vpp 2", ""),
    ("Before the work", "A flag layout does not use", "attnres layout --sublayers 8 --blocks 2 --d-model 16 --dtype fp32", ""),
    ("Before the work", "A flag recompute does not use", "attnres recompute --sublayers 8 --blocks 2 --d-model 16 --seq-shards 8", ""),
    ("Before the work", "A flag the scheme comparison does not use", "attnres cost --sublayers 8 --blocks 2 --d-model 16 --scheme block --seq-shards 8", ""),
    ("Before the work", "An empty entry in --values", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,,2 --metric io_multiples_of_d.mhc", ""),
    ("Before the work", "A trailing comma in --values", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,2, --metric io_multiples_of_d.mhc", ""),
    ("Before the work", "A value below the input's minimum in --values", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 0,2 --metric io_multiples_of_d.mhc", ""),
    ("Before the work", "A directory as the scenario", "attnres report mine --out r", "mine/notes.txt"),
    ("Before the work", "A device as the scenario", "attnres report /dev/null --out r", ""),
    ("Before the work", "A file as the model directory", "attnres forward --model ok.toml --tokens 1", "ok.toml"),
    ("Before the work", "A scenario error at the key, not the table", "attnres report layers.toml --out r", "layers.toml"),
    ("Before the work", "--threads with the GPU (refused before CUDA starts)", "attnres forward --model m --tokens 1 --device cuda --threads 4", "m"),
    ("Before the work", "--threads with the single-threaded reference engine", "attnres forward --model m --tokens 1 --engine reference --threads 4", "m"),
    ("Before the work", "--bandwidth on with the GPU", "attnres bench forward --model m --seq 16 --device cuda --bandwidth on", "m"),
    ("Before the work", "--two-phase where every read is one-shot", "attnres forward --model m --tokens 1 --mode mhc --two-phase off", "m"),
    ("Before the work", "--schedule-block where every read is one-shot", "attnres forward --model m --tokens 1 --mode full --query-source input --schedule-block 2", "m"),
    ("Before the work", "Scheme flags with --resume", "attnres train --data text.txt --resume t --out t --gate sigmoid", "text.txt"),
    ("Before the work", "--seed without random masks", "attnres mask --model m --data text.txt --drop embedding --random 0 --seed 3", "m"),
    ("Before the work", "A chart axis flag without a chart", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,2 --metric io_multiples_of_d.mhc --log-y", ""),
    ("Before the work", "--name for printed CSV", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --x blocks --values 1,2 --metric io_multiples_of_d.mhc --name io", ""),
    ("Before the work", "A flag of the swept input", "attnres sweep --sublayers 8 --blocks 2 --d-model 16 --seq 256 --x tokens --values 64,128 --metric prefill_history_gb.total", ""),
    ("Before the work", "A link flag with one pipeline rank", "attnres pipeline --layers 4 --block-size 2 --d-model 64 --overlap off", ""),
    ("Before the work", "--train-steps when the sections leave training out", "attnres report untrained.toml --out r --train-steps 3", "untrained.toml"),
    ("Output directories", "A model directory holding an interrupted write (a reader changes nothing)", "attnres inspect m-interrupted", "m-interrupted"),
    ("Output directories", "A commit record made elsewhere (copied, downloaded or written by hand)", "attnres recover m-copied", "m-copied"),
    ("train --resume", "Data file changed since the checkpoint", "attnres train --resume ck --out x", "text.txt + ck/train_state.json"),
    ("train --resume", "Recorded data file missing", "attnres train --resume ck-moved --out x", "ck-moved/train_state.json"),
    # Hostile files (docs/output-safety.md, "Reading files"); appended, so the numbers above stay.
    ("Reading files", "config.json nested deeper than 64 levels", "attnres inspect m-deep", "m-deep/config.json"),
    ("Reading files", "A key twice in config.json", "attnres inspect m-dup", "m-dup/config.json"),
    ("Reading files", "A training state without checksums of its files (version 1)", "attnres train --resume ck-v1 --out x", "ck-v1/train_state.json"),
]


def make_fixtures(root):
    run = lambda *a: subprocess.run([ATTNRES, *a], cwd=root, check=True, capture_output=True)
    run("init-model", "--layers", "2", "--d-model", "16", "--heads", "4", "--kv-heads", "2", "--ffn", "24",
        "--vocab", "20", "--seed", "3", "--out", "m")
    for name in ("m-truncated", "m-nan", "m-missing", "m-badjson", "m-hostile"):
        shutil.copytree(os.path.join(root, "m"), os.path.join(root, name))
    weights = os.path.join(root, "m", "model.safetensors")
    data = open(weights, "rb").read()
    open(os.path.join(root, "m-truncated", "model.safetensors"), "wb").write(data[: len(data) // 2])
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    first = min((v["data_offsets"][0], k) for k, v in header.items() if k != "__metadata__")
    nan = bytearray(data)
    nan[8 + n + first[0] : 8 + n + first[0] + 4] = struct.pack("<I", 0x7FC00000)
    open(os.path.join(root, "m-nan", "model.safetensors"), "wb").write(bytes(nan))
    # m-missing: lm_head.weight removed (the remaining tensors keep their bytes and order).
    kept, blobs, offset = {}, [], 0
    for name, info in sorted(((k, v) for k, v in header.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
        if name == "lm_head.weight":
            continue
        b, e = info["data_offsets"]
        blob = data[8 + n + b : 8 + n + e]
        kept[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(kept).encode()
    open(os.path.join(root, "m-missing", "model.safetensors"), "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    open(os.path.join(root, "m-badjson", "config.json"), "w").write("{ \"hidden_size\": 16,\n")
    open(os.path.join(root, "m-hostile", "config.json"), "wb").write(HOSTILE_CONFIG)
    # A write of m cut short after its commit record (m-interrupted: the record names the staging
    # folder it made), and the same record copied elsewhere (m-copied: another folder's inode).
    for name in ("m-interrupted", "m-copied"):
        shutil.copytree(os.path.join(root, "m"), os.path.join(root, name))
        staging = os.path.join(root, name, ".attnres-staging.1.0")
        os.makedirs(staging)
        shutil.copy(os.path.join(root, "m", "config.json"), staging)
        st = os.lstat(staging)
        ident = [st.st_dev, st.st_ino] if name == "m-interrupted" else [1, 2]
        record = {"owner": "model", "staging": ".attnres-staging.1.0", "staging_id": ident,
                  "files": ["config.json"], "remove": [], "directories": [],
                  "sets": {"model": ["config.json", "model.safetensors"]}}
        open(os.path.join(root, name, ".attnres-commit.json"), "w").write(json.dumps(record))
    for name, text in FILES.items():
        os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
        open(os.path.join(root, name), "w").write(text)
    # binary.bin: an ELF-like header with a NUL byte (not shown in the page).
    open(os.path.join(root, "binary.bin"), "wb").write(b"\x7fELF\x00\x01 not text")


def main():
    root = tempfile.mkdtemp()
    make_fixtures(root)
    out = sys.stdout
    out.write("""# Error catalogue

Every user-facing error of `attnres`, with an example input and the exact message it prints on
standard error. Exit status: **1** for a bad input file or data (or an output directory that may
not be written), **2** for a bad command line, **130** when Ctrl-C or SIGTERM stopped the work.
Nothing is written when a command fails: outputs are built in a staging folder first, and an
output directory is written only under the rules of [output-safety.md](output-safety.md).
Messages are valid UTF-8: bytes from files that are not printable text are shown as `\\xNN`. The
GUI shows the same messages in its error banner and keeps running.

This page is generated by `tests/errors/make_catalogue.py` from the real program, and
`tests/cli/test_error_catalogue.cpp` checks every entry against it, so it stays true.

Fixtures the examples use (the test makes them the same way): `m` is
`attnres init-model --layers 2 --d-model 16 --heads 4 --kv-heads 2 --ffn 24 --vocab 20 --seed 3 --out m`;
`m-truncated` is `m` with `model.safetensors` cut to half its length; `m-nan` has a NaN as the
first element of the first tensor in the data section; `m-missing` lacks `lm_head.weight`;
`m-badjson` has a `config.json` that is not JSON; `m-hostile` has the `config.json`
`{"hidden_size\\xff\\x1b[31m": 16}` (an invalid UTF-8 byte and a terminal escape in a key);
`m-interrupted` is `m` with a write of its `config.json` cut short after the commit record
(`.attnres-commit.json` naming the staging folder it made), `m-copied` the same with a record
naming another folder (as after a copy).
`binary.bin` holds the bytes `7f 45 4c 46 00 01` then ` not text`. Files shown in a `file:` block
are written as given.
""")
    section = None
    shown = set()
    for number, (sec, title, command, fixture) in enumerate(CASES, start=1):
        if sec != section:
            out.write(f"\n## {sec}\n")
            section = sec
        args = shlex.split(command)[1:]
        result = subprocess.run([ATTNRES, *args], cwd=root, capture_output=True, text=True)
        message = result.stderr.strip()
        out.write(f"\n### E{number:02d} {title}\n\n")
        for name in fixture.split(" + "):  # "a + b": two files
            if name in FILES and name not in shown:
                out.write(f"```file:{name}\n{FILES[name]}```\n\n")
                shown.add(name)
        out.write(f"```console\n$ {command}\n{message}\n[exit {result.returncode}]\n```\n")
        if result.returncode == 0 or "\n" in message:
            print(f"unexpected: {command} -> {result.returncode} {message!r}", file=sys.stderr)
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
