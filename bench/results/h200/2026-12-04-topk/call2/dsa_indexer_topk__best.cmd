python3 -m gpu_worker evaluate --target dsa_indexer_topk --candidate gpu_worker/candidates/dsa_indexer_topk/best.py --profile full --out /root/out/reports/dsa_indexer_topk__best.json
