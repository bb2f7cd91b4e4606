# Sourced by the device scripts: CARD (h200, h100: the prefix of its data files) and
# DEVICE (its specs/devices name) of the GPU this machine has; exits 2 on another card.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $GPU"
case "$GPU" in
  *H200*) CARD=h200 DEVICE=h200-sxm ;;
  *H100*) CARD=h100 DEVICE=h100-sxm ;;
  *) echo "no committed data for $GPU"; exit 2 ;;
esac
