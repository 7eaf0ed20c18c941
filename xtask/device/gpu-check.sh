#!/usr/bin/env bash
# The trainer's GPU check, prepared to run as one command on a lent GPU machine.
#
# That machine has no Rust toolchain and no network, so everything it runs is built
# here first: `cargo xtask device-bundle` puts a release `arlbook` (gzipped) and the
# Vulkan loader's package into target/device/. Then, from the repository root there, with
# target/device carried:
#
#     bash xtask/device/gpu-check.sh
#
# It measures, in this order, and writes each result to $OUT (or target/device/out):
#   1. bench-arlbook.json, bench-torch.json: the trainer's synthetic GRPO workload at
#      the GPU config's model shape, arlbook (burn wgpu) and PyTorch (CUDA) side by side;
#   2. metrics.jsonl: a shortened run of configs/gpu.toml (SFT_STEPS SFT steps, then
#      GRPO_STEPS GRPO steps, no probes and no selection, stopped after
#      TRAIN_SECONDS), whose rows carry tokens/s;
#   3. summary.json: the ratios and the median tokens/s of each stage;
# plus gpu.csv (nvidia-smi) and log.txt (everything printed).
#
# The environment variables below change the sizes, the backend and the config, so
# the same script can be tried on a CPU (BACKEND=cpu TORCH_DEVICE=cpu CONFIG=...).
set -uo pipefail

out=${OUT:-target/device/out}
bin=${BIN:-}
backend=${BACKEND:-gpu}
torch_device=${TORCH_DEVICE:-cuda}
python=${PYTHON:-python3}
config=${CONFIG:-configs/gpu.toml}
sft_steps=${SFT_STEPS:-150}
grpo_steps=${GRPO_STEPS:-4}
train_seconds=${TRAIN_SECONDS:-300}
# The GPU config's model; one GRPO batch of 32 tasks x 16 rollouts.
shape=${SHAPE:---layers 6 --width 384 --heads 6 --context 1024 --rows 512 --prompt 400 --new-tokens 48 --microbatch-rows 64}

mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
if [ -z "$bin" ]; then
    bin=$(mktemp -d)/arlbook
    gunzip -c target/device/arlbook.gz >"$bin" && chmod +x "$bin" || exit 1
fi
echo "gpu-check: backend $backend, torch on $torch_device, config $config"

# The Vulkan loader, when the machine has none (its driver is mounted, the loader not).
if [ "$backend" != cpu ] && ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
    for deb in target/device/gl/*.deb; do dpkg -x "$deb" /; done
    ldconfig
fi
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
    /usr/share/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then export VK_DRIVER_FILES=$icd; fi
done
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/gpu.csv"
fi

echo "== 1. benchmark: arlbook (burn) and PyTorch, same model and workload"
# shellcheck disable=SC2086 # the shape is a list of flags
"$bin" bench-train --backend "$backend" $shape >"$out/bench-arlbook.json"
# The same vocabulary as arlbook's tokenizer, so both models have the same parameters.
vocab=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab"])' "$out/bench-arlbook.json")
# shellcheck disable=SC2086
"$python" xtask/bench/torch_policy.py $shape --vocab "$vocab" --device "$torch_device" \
    --threads "$(nproc)" >"$out/bench-torch.json"
cat "$out/bench-arlbook.json" "$out/bench-torch.json"

echo "== 2. a shortened training run: $sft_steps SFT steps, $grpo_steps GRPO steps"
short=$(mktemp --suffix=.toml)
awk -v sft="$sft_steps" -v grpo="$grpo_steps" '
    /^\[/ { section = $0 }
    section == "[sft]" && /^steps *=/ { $0 = "steps = " sft }
    section == "[grpo]" && /^steps *=/ { $0 = "steps = " grpo }
    section == "[sft]" && /^probe_every *=/ { $0 = "probe_every = 0" }
    section == "[selection]" && /^enabled *=/ { $0 = "enabled = false" }
    { print }' "$config" >"$short"
run=$(mktemp -d)
timeout "$train_seconds" "$bin" train --config "$short" --out "$run" --backend "$backend"
echo "train exited with $? (124: stopped at TRAIN_SECONDS)"
cp "$run/metrics.jsonl" "$out/metrics.jsonl"

echo "== 3. summary"
"$python" - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
ours = json.load(open(f"{out}/bench-arlbook.json"))
torch = json.load(open(f"{out}/bench-torch.json"))
rows = [json.loads(line) for line in open(f"{out}/metrics.jsonl") if line.strip()]
def median(stage, key):
    values = [r[key] for r in rows if r.get("stage") == stage and key in r]
    return statistics.median(values) if values else None
summary = {
    "arlbook": ours["implementation"], "pytorch": torch["implementation"],
    "rollout_tokens_per_s_ratio": ours["rollout_tokens_per_s"] / torch["rollout_tokens_per_s"],
    "update_tokens_per_s_ratio": ours["update_tokens_per_s"] / torch["update_tokens_per_s"],
    "grpo_step_speed_ratio": torch["grpo_step_s"] / ours["grpo_step_s"],
    "multi_turn_tokens_per_s_ratio": ours["multi_turn_tokens_per_s"] / torch["multi_turn_tokens_per_s"],
    "bench_peak_resident_mib": {"arlbook": ours.get("peak_resident_mib"), "pytorch": torch.get("peak_resident_mib")},
    "train_sft_steps": sum(r.get("stage") == "sft" for r in rows),
    "train_grpo_steps": sum(r.get("stage") == "grpo" for r in rows),
    "train_sft_tokens_per_s_median": median("sft", "tokens_per_s"),
    "train_grpo_tokens_per_s_median": median("grpo", "tokens_per_s"),
    "train_grpo_step_s_median": median("grpo", "step_s"),
}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
