# Checks a rerun against a kept result: per seed and arm, is the full validation NLL and every
# training loss the same bits? Usage: python3 tools/results/compare_rerun.py KEPT_RESULT_JSON RERUN_OUTPUT_DIR
# (RERUN_OUTPUT_DIR is the --output-dir given to the rerun). Optional: nothing builds or tests with it.
import json, sys, glob
kept = json.load(open(sys.argv[1]))
rerun = json.load(open(glob.glob(sys.argv[2] + '/*/*/result.json')[0]))
arms = [k for k in rerun['seed_results'][0] if k != 'seed']
by_seed = {s['seed']: s for s in kept['seed_results']}
all_same = True
for s in rerun['seed_results']:
    k = by_seed[s['seed']]
    for a in arms:
        same_nll = json.dumps(k[a].get('full_validation_lm_loss')) == json.dumps(s[a].get('full_validation_lm_loss'))
        same_losses = k[a]['training']['losses'] == s[a]['training']['losses'] and len(s[a]['training']['losses']) > 0
        all_same = all_same and same_nll and same_losses
        print(f"seed {s['seed']} {a}: full NLL {s[a].get('full_validation_lm_loss')} kept {k[a].get('full_validation_lm_loss')} identical={same_nll}, training losses identical={same_losses}")
print('rerun built from commit', rerun['provenance']['code_commit'])
print('identical' if all_same else 'DIFFERENT')
sys.exit(0 if all_same else 1)
