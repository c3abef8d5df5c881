#!/usr/bin/env bash
# A real one-node SLURM on 127.0.0.1 for tests: munge + slurmctld + slurmd,
# state and logs under DIR, stopped by pid.
#
#   scripts/slurm_test_cluster.sh start DIR   # installs slurm-wlm + munge first when root
#   scripts/slurm_test_cluster.sh stop DIR
#
# No accounting (AccountingStorageType=accounting_storage/none): job status
# comes from squeue (profiles/slurm: slurm-status-command squeue,
# slurm-no-account). Finished jobs are written to DIR/jobcomp.txt
# (JobCompType=jobcomp/filetxt). The node advertises one "gpu" GRES (no device
# behind it) so that GPU rules' --gres=gpu:1 requests are scheduled as on a
# real cluster; their code runs on the CPU. /etc/slurm/slurm.conf is written
# too: the job-step plugin drops SLURM_CONF before its inner srun.
set -euo pipefail

cmd="${1:-}"; DIR="${2:-}"
[ -n "$cmd" ] && [ -n "$DIR" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
mkdir -p "$DIR"; DIR="$(cd "$DIR" && pwd)"
MARK="# written by speechprep scripts/slurm_test_cluster.sh"

stop() {
  for d in slurmd slurmctld munged; do
    if [ -f "$DIR/$d.pid" ]; then
      pid="$(cat "$DIR/$d.pid")"
      if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
      fi
      rm -f "$DIR/$d.pid"
    fi
  done
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

# --- packages -------------------------------------------------------------------
need=()
for p in slurm-wlm munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "missing Debian packages: ${need[*]} (as root: apt-get install -y ${need[*]})" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq "${need[@]}" >/dev/null
fi
[ "$(id -u)" = 0 ] || { echo "the test cluster's daemons run as root" >&2; exit 1; }
stop  # a previous run's daemons, if any

# --- munge ------------------------------------------------------------------------
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged --force --pid-file="$DIR/munged.pid.tmp" 2>/dev/null \
  || /usr/sbin/munged --force
for _ in $(seq 50); do [ -s "$DIR/munged.pid.tmp" ] && break; sleep 0.1; done
[ -s "$DIR/munged.pid.tmp" ] && mv "$DIR/munged.pid.tmp" "$DIR/munged.pid" \
  || pgrep -x munged | head -1 > "$DIR/munged.pid"

# --- slurm.conf -----------------------------------------------------------------------
host="$(hostname -s)"
cpus="$(nproc)"
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 85 / 100 ))
mkdir -p "$DIR/state" "$DIR/spool"
cat > "$DIR/slurm.conf" <<EOF
$MARK
ClusterName=speechprep-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
MinJobAge=600
ReturnToService=2
MpiDefault=none
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
EOF
cat > "$DIR/gres.conf" <<EOF
$MARK
NodeName=$host Name=gpu Count=1 File=/dev/null
EOF
mkdir -p /etc/slurm
for f in slurm.conf gres.conf; do
  if [ -e "/etc/slurm/$f" ] && ! grep -q "$MARK" "/etc/slurm/$f"; then
    echo "/etc/slurm/$f exists and is not ours: not overwriting a real cluster's config" >&2; exit 1
  fi
  cp "$DIR/$f" "/etc/slurm/$f"
done
export SLURM_CONF="$DIR/slurm.conf"

# --- daemons --------------------------------------------------------------------------
/usr/sbin/slurmctld -c
/usr/sbin/slurmd -N "$host"
for _ in $(seq 100); do
  state="$(sinfo -h -N -o '%t' 2>/dev/null | head -1 || true)"
  [ "$state" = idle ] && break
  [ "$state" = "idle*" ] || [ "$state" = "unk*" ] || [ "$state" = "down*" ] || true
  sleep 0.2
done
[ "$(sinfo -h -N -o '%t' | head -1)" = idle ] || {
  echo "test SLURM did not come up; see $DIR/slurmctld.log and $DIR/slurmd.log" >&2
  sinfo -N >&2 || true; stop; exit 1; }
echo "test SLURM up: node $host ($cpus CPUs, $mem_mb MB, gpu:1 gres), partitions cpu (default) and gpu; state in $DIR"
