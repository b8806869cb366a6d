"""attention bfloat16 rounding noise in zero gradient, reduced by hand. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
# thunderfx's bfloat16 sdpa backward leaves rounding noise where eager's gradient is exactly 0 (float64's 1e-18): a
# tiny Llama on equal tokens, whose softmax gradient cancels; AdamW's next step moves each such weight by about lr.
import copy, os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
import transformers
from thunder.dynamo import thunderfx
config = transformers.LlamaConfig(vocab_size=8, num_hidden_layers=1, hidden_size=8, num_attention_heads=2, intermediate_size=8, max_position_embeddings=3, num_key_value_heads=2, attn_implementation='sdpa', use_cache=False)
torch.manual_seed(1)
net = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
x = torch.ones((1, 3), dtype=torch.int64)  # equal tokens: every position's value is equal
def train(model, fn):  # 3 AdamW steps: the query weight's largest gradient at each
    q = model.model.layers[0].self_attn.q_proj.weight
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    grads = []
    for _ in range(3):
        optimizer.zero_grad()
        fn(input_ids=x).logits.backward(torch.ones(1, 3, 8, dtype=torch.bfloat16))
        grads.append(q.grad.abs().max().item())
        optimizer.step()
    return grads
eager, compiled = copy.deepcopy(net), copy.deepcopy(net)
expected, actual = train(eager, eager), train(compiled, thunderfx(compiled))
print(f"q_proj.weight's largest gradient per step: eager {expected}, thunderfx {actual}")
# AdamW moves a weight whose gradient is above its eps (1e-8) by about lr; below it, by a fraction of lr
sys.exit(1 if max(expected) == 0 and max(actual) > 1e-8 else 0)
