"""The experiments the project reproduces (docs/seed-experiments.md): the seed experiments S1-S3 (``seeds``), the real
multi-turn comparison (``real_multiturn``), the vLLM reports (``vllm``) and Marconi's byte budgets
(``marconi``). Each returns rows; ``commands`` prints them."""
