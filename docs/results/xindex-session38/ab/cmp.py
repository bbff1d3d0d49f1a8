import json,glob,collections
res=collections.defaultdict(list)  # (bin,ds,wl,th) -> ratios
for f in glob.glob('*.json'):
    b,ds,rnd,_=f.split('.')
    rows=json.load(open(f))['rows']
    by=collections.defaultdict(dict)
    for r in rows: by[(r['workload'],r['threads'])][r['engine']]=r['throughput_mops']
    for (wl,th),e in by.items():
        best=max(e.get('btreemap',0),e.get('scc-tree',0))
        res[(ds[9:13],wl,th,b)].append((e['xindex']/best, e['xindex']))
keys=sorted({k[:3] for k in res})
print('ds wl th | old ratios (mops) | new ratios (mops)')
for k in keys:
    o=res[k+('lidx38',)]; n=res[k+('lidx38e',)]
    f=lambda l:' '.join(f'{r:.2f}x({m:.1f})' for r,m in l)
    print(k[0],k[1],k[2],'|',f(o),'|',f(n))
