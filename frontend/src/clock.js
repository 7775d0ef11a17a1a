// One shared ticking clock for countdowns and reading ages.
import { onBeforeUnmount, onMounted, ref } from "vue";

export function useNow(intervalMs = 1000) {
  const now = ref(Date.now());
  let timer = null;
  onMounted(() => {
    timer = setInterval(() => {
      now.value = Date.now();
    }, intervalMs);
  });
  onBeforeUnmount(() => clearInterval(timer));
  return now;
}
