"""Circles of imports among the files of one folder of src/ (strongly connected sets, largest
first), from `super::x` and `crate::<path>::x` paths outside test modules, at a git revision.
The module layers are tests/integration/layering.rs's; this looks inside a module.

    python3 scripts/file_circles.py HEAD"""
import re, subprocess, sys, collections
rev = sys.argv[1] if len(sys.argv) > 1 else 'HEAD'
files = [f for f in subprocess.check_output(['git','ls-tree','-r','--name-only',rev,'src/']).decode().split() if f.endswith('.rs')]
def modpath(f):
    p = f[len('src/'):-3].split('/')
    if p[-1] == 'mod': p = p[:-1]
    if p == ['lib'] or p == ['main']: return []
    return p
paths = {tuple(modpath(f)): f for f in files}
edges = collections.defaultdict(set)
for f in files:
    text = subprocess.check_output(['git','show',f'{rev}:{f}']).decode()
    text = text.split('#[cfg(test)]\nmod tests')[0]
    me = modpath(f)
    is_mod = f.endswith('mod.rs') or f in ('src/lib.rs',)
    parent = me if is_mod else me[:-1]
    for line in text.split('\n'):
        code = line.split('//')[0]
        for m in re.finditer(r'\b(super|crate)((?:::[a-z_0-9]+)+)', code):
            segs = m.group(2).strip(':').split('::')
            base = list(parent) if m.group(1) == 'super' else []
            if m.group(1) == 'super' and not is_mod: pass
            elif m.group(1) == 'super': base = list(me[:-1])
            # longest prefix that is a file
            target = None
            for k in range(len(segs), 0, -1):
                t = tuple(base + segs[:k])
                if t in paths: target = paths[t]; break
            if target and target != f:
                # same folder only
                if target.rsplit('/',1)[0] == f.rsplit('/',1)[0] and not target.endswith('mod.rs') and not f.endswith('mod.rs'):
                    edges[f].add(target)
# Tarjan
index = {}; low = {}; stack = []; on = set(); sccs = []; i = [0]
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index: strong(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v: break
        sccs.append(c)
for v in files:
    if v not in index: strong(v)
big = sorted([c for c in sccs if len(c) > 1], key=len, reverse=True)
for c in big[:8]: print(len(c), sorted(x.replace('src/','') for x in c))
