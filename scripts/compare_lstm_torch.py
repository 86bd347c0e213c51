"""Check that memctl's LSTM step computes what `nn.LSTM` computes (the model the benchmark
`scripts/bench_models_vs_torch.py --model lstm` times).

    memctl bench specs/examples/assoc.mem assoc_lstm --dump /tmp/lstm.json
    python3 scripts/compare_lstm_torch.py /tmp/lstm.json

Loads memctl's initial parameters and batch into `nn.Embedding`, `nn.LSTM(batch_first=False)`
and `nn.Linear` (PyTorch's gate order i, f, g, o is memctl's), computes the loss of the last
step's classes and the gradients in float64, and compares them with memctl's (float32) loss
and gradient norms. memctl trains this model with the embedding folded into the LSTM's input
weights (`prims/layers/embed_lstm.rs`), so this also checks that fusion against PyTorch. Exits 1 on a
mismatch. Needs torch.
"""
import json, sys
import torch
import torch.nn.functional as F

from compare_report import report

dump = json.load(open(sys.argv[1]))
param = lambda name: torch.tensor(dump["params"][name][1], dtype=torch.float64).reshape(dump["params"][name][0])
table = param("x.embed.table")
hidden = param("c.lstmCell.w_hh").shape[1]
embed = torch.nn.Embedding(*table.shape).double()
lstm = torch.nn.LSTM(table.shape[1], hidden).double()
readout = torch.nn.Linear(hidden, param("out.linear.weight").shape[0]).double()
with torch.no_grad():
    embed.weight.copy_(table)
    for ours, theirs in [("w_ih", "weight_ih_l0"), ("b_ih", "bias_ih_l0"), ("w_hh", "weight_hh_l0"), ("b_hh", "bias_hh_l0")]:
        getattr(lstm, theirs).copy_(param("c.lstmCell." + ours))
    readout.weight.copy_(param("out.linear.weight"))
    readout.bias.copy_(param("out.linear.bias"))
named = {
    "x.embed.table": embed.weight,
    "c.lstmCell.w_ih": lstm.weight_ih_l0,
    "c.lstmCell.b_ih": lstm.bias_ih_l0,
    "c.lstmCell.w_hh": lstm.weight_hh_l0,
    "c.lstmCell.b_hh": lstm.bias_hh_l0,
    "out.linear.weight": readout.weight,
    "out.linear.bias": readout.bias,
}

tokens = torch.tensor(dump["inputs"][1], dtype=torch.long).reshape(dump["inputs"][0])  # [T, B]
targets = torch.tensor(dump["targets"][1], dtype=torch.long).reshape(dump["targets"][0])  # [1, B]
out, _ = lstm(embed(tokens))
loss = F.cross_entropy(readout(out[-1]), targets[0])
loss.backward()
report(dump, loss, named)
