"""Advice: which card to buy, what would make a job fit, what would make it faster.

ranking.py  every catalog card for a workload, ranked; the cheapest card that runs it comfortably
fixes.py    options (AMP, accumulation, checkpointing, quantization, LoRA, GPUs, a bigger card)
            and bottleneck suggestions, each re-estimated
guide.py    the size guide (model size -> memory class), derived from the estimator
diagnosis.py what limited a measured run (achieved FLOP/s and bytes/s against the card's peaks)
            and the one change to try
text.py     the sentences, in English or Simplified Chinese (i18n.py holds the catalogue)

Everything here is arithmetic on the estimator: no framework import.
"""
