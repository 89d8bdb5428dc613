python3 -m gpu_worker evaluate --target dsa_indexer_topk --candidate gpu_worker/candidates/dsa_indexer_topk/seed.py --profile full --out /tmp/proof/reports/dsa_indexer_topk__seed.json
