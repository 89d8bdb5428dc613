python3 -m gpu_worker evaluate --target dsa_topk --candidate gpu_worker/candidates/dsa_topk/best.py --profile full --out /root/out/reports/dsa_topk__best.json
