// Published model shapes the cost tests share (unresolved CostInputs, so a test can set its own
// sequence and parallel settings before resolving).
#pragma once

#include "attnres/cost.hpp"

namespace attnres::test {

// DeepSeek-V3 (config.json, huggingface.co/deepseek-ai/DeepSeek-V3): 61 layers, hidden 7168, MLA
// with 128 heads of 128, q_lora_rank 1536, intermediate 18432, 256 routed experts of 2048, top-8,
// 1 shared, 3 dense layers first, vocab 129280; the multi-token-prediction layer left out. With
// Block AttnRes at N = 8.
inline CostInputs deepseek_v3_shape() {
  CostInputs in;
  in.layers = 61;
  in.d_model = 7168;
  in.attention = AttentionKind::mla;
  in.heads = 128;
  in.head_dim = 128;
  in.q_latent = 1536;
  in.ffn = 18432;
  in.experts = 256;
  in.active = 8;
  in.shared = 1;
  in.expert_ffn = 2048;
  in.dense_layers = 3;
  in.vocab = 129280;
  in.blocks = 8;
  return in;
}

}  // namespace attnres::test
