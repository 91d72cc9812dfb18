#!/bin/bash
# rd and flat, N=4, 8 KiB allreduce, each placement of ranks on the two cores, alternating rounds.
cd /work/main
for round in 1 2 3; do
  for pl in none 0011 0101 0110; do
    for a in rd flat; do
      if [ $pl = none ]; then
        t=$(build/bin/baton-run -n 4 build/bin/baton-bench -b 8K -e 8K -w 500 -n 5000 -a $a -z 2>/dev/null | awk '$1 ~ /^[0-9]/ {print $0}' | tail -1)
      else
        t=$(PL=$pl build/bin/baton-run -n 4 bash -c 'exec taskset -c ${PL:$BATON_RANK:1} "$@"' bash build/bin/baton-bench -b 8K -e 8K -w 500 -n 5000 -a $a -z 2>/dev/null | awk '$1 ~ /^[0-9]/ {print $0}' | tail -1)
      fi
      echo "round $round placement $pl $a: $t"
    done
  done
done
