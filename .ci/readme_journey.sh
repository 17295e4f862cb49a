#!/usr/bin/env bash
# The README's sim-training journey, run as written in a scratch directory: every command of its
# two "Parallel sim training" blocks in order, with each <placeholder> replaced by what the
# command before it produced (the checkpoint in its JSON line), "[human=scripted]" run both
# without and with the option, and "robotrl train-rl ... role=split" given the residual run's
# arguments. The safety line uses the critic bench/reflex_violations.py exports.
#
#   .ci/readme_journey.sh [workdir] [part]   # about an hour on 2 cores; not part of .ci/run
#
# part: all (default) | 1 (every command that starts no Ray) | 2 (the Ray and ROS 2 ones, after
# part 1 in the same workdir) | 3 (the teleop and two-machine lines: train-reward, bags, the HIL
# actor launch on a two-node Ray cluster; after part 1): Ray's tests stop every Ray process on
# the machine, so a CI run beside this script may overlap part 1 only.
#
# Prints "+ <command>" before and "= <seconds> s, exit <code>" after each command, and its JSON
# line; stops at the first failure.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
part="${2:-all}"
mkdir -p "$work"
cd "$work"
export MUJOCO_GL="${MUJOCO_GL:-egl}" PYTHONUNBUFFERED=1
echo "journey in $work (repo $repo)"

last_json=""
run() {  # run one command (a string, as the README writes it); keep its JSON line
  echo "+ $1"
  local t0 rc out
  t0=$(date +%s)
  set +e
  out=$(eval "$1" 2>"$work/last.err")
  rc=$?
  set -e
  echo "$out" | tail -n 1
  echo "= $(($(date +%s) - t0)) s, exit $rc"
  if [ "$rc" -ne 0 ]; then
    tail -n 20 "$work/last.err" >&2
    exit "$rc"
  fi
  last_json=$(echo "$out" | tail -n 1)
}
field() {  # a top-level key of the last JSON line
  python -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$last_json" "$1"
}

if [ "$part" = 1 ] || [ "$part" = all ]; then
run "robotrl collect task=lift device=expert episodes=200 out=data/lift.zarr"
run "robotrl train-bc dataset=data/lift.zarr policy=flow steps=4000 \
    'obs_keys=[state/ee_pos,state/ee_quat,state/gripper,state/cube_pos,state/cube_quat,state/joint_pos]'"
bc=$(field checkpoint)
echo "bc=$bc" > "$work/paths.env"
run "robotrl eval checkpoint=$bc episodes=50 num_envs=2"
run "robotrl train-rl checkpoint=$bc demos=data/lift.zarr residual.scale=0.5 target_success=0.9"
rl=$(field checkpoint)
run "robotrl train-rl checkpoint=$bc demos=data/lift.zarr residual.scale=0.5 target_success=0.9 human=scripted"
run "robotrl eval checkpoint=$rl episodes=50"
run "robotrl train-rl algo=dsrl checkpoint=$bc"
run "robotrl train-rl algo=flow_sde checkpoint=$bc num_envs=2 total_steps=150000 \
    eval_every=10000 eval_episodes=50 target_success=0.85"
run "robotrl eval checkpoint=$bc backend=pybullet episodes=50"
run "python $repo/bench/reflex_violations.py task=lift out=outputs/reflex"
run "robotrl eval checkpoint=$bc safety=reflex safety_critic=outputs/reflex/critic_lift.npz"
fi
if [ "$part" = 2 ] || [ "$part" = all ]; then
# shellcheck disable=SC1091
. "$work/paths.env"
run "robotrl train-rl checkpoint=$bc demos=data/lift.zarr residual.scale=0.5 target_success=0.9 role=split"
run "robotrl train-rl checkpoint=$bc demos=data/lift.zarr backend=pybullet \
    ray.workers=2 num_envs=2 residual.scale=0.5"
# A robot with ROS 2, the README's "use_sim:=true profile:=sim" variant (no ROS 2 on this
# machine: the launch file's processes are run by .ci/run_launch.py)
run "python $repo/.ci/run_launch.py $repo/launch/policy_deploy.launch.py --wait robotrl_policy \
    checkpoint:=$bc use_sim:=true profile:=sim task:=lift episodes:=3"
run "python $repo/.ci/run_launch.py $repo/launch/collect_teleop.launch.py --wait robotrl_recorder \
    device:=expert out:=data/pick.zarr task:=lift use_sim:=true profile:=sim episodes:=2"
fi
if [ "$part" = 3 ] || [ "$part" = all ]; then
# shellcheck disable=SC1091
. "$work/paths.env"
# Teleop sessions: a success classifier from camera episodes; bags of two sessions, imported
run "robotrl collect task=lift device=expert episodes=20 'cameras=[front,wrist]' out=data/lift_cam.zarr"
run "robotrl train-reward dataset=data/lift_cam.zarr cameras=[front,wrist]"
for s in 0 1; do
  run "python $repo/.ci/run_launch.py $repo/launch/collect_teleop.launch.py --wait robotrl_recorder \
    device:=expert out:=data/pick.zarr task:=lift use_sim:=true profile:=sim episodes:=1 \
    record_bag:=true bag_path:=bags/s$s"
done
run "robotrl dataset import path=data/bags.zarr from=rosbag inputs=[bags/s0,bags/s1] profile=sim"
# Human-in-the-loop RL over two Ray nodes, the README's lines with both "machines" here: the
# head and the learner ("gpu-box"), a second node and the hil_rl_actor launch ("robot-pc",
# human:=scripted for the SpaceMouse, use_sim:=true profile:=sim for the arm)
export RAY_AUTH_MODE=token
ray stop --force >/dev/null 2>&1 || true
run "ray start --head --port=6379 --disable-usage-stats"
robotrl train-rl role=learner checkpoint="$bc" demos=data/pick.zarr ray.address=auto \
  >"$work/learner.out" 2>"$work/learner.err" &
learner=$!
run "ray start --address=$(hostname -I | awk '{print $1}'):6379"
run "python $repo/.ci/run_launch.py $repo/launch/hil_rl_actor.launch.py --wait robotrl_actor \
    checkpoint:=$bc human:=scripted use_sim:=true profile:=sim total_steps:=2000"
kill -TERM "$learner"
wait "$learner" || { tail -n 20 "$work/learner.err" >&2; exit 1; }
echo "learner: $(tail -n 1 "$work/learner.out")"
ray stop --force >/dev/null
fi
echo "journey done ($part)"
