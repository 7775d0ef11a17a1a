// A live turn as a Vue view holds it: the reduced state (liveTurn.js), the stream's
// connection, and Cancel. Shared by the agent console and a turn's replay.
import { computed, onBeforeUnmount, ref, shallowRef } from "vue";
import { api } from "./api.js";
import { applyEvent, emptyTurn, fromExecution, isOver, withExecutionId } from "./liveTurn.js";
import { followTurn } from "./turnStream.js";

export function useLiveTurn() {
  const turn = shallowRef(emptyTurn());
  const connection = ref("idle"); // idle | streaming | reconnecting | closed | lost
  const error = ref("");
  const fieldErrors = ref({}); // a turn refused before it started: the server's field errors
  const cancelling = ref(false);
  const cancelError = ref("");
  let controller = null;

  const running = computed(() => ["streaming", "reconnecting"].includes(connection.value) && !isOver(turn.value));

  /** Follow the turn `open(signal)` starts (or replays) to its end. Resolves with the final state. */
  async function follow(open, initial = emptyTurn()) {
    controller?.abort();
    const own = new AbortController();
    controller = own;
    turn.value = initial;
    error.value = "";
    fieldErrors.value = {};
    cancelError.value = "";
    cancelling.value = false;
    connection.value = "streaming";
    try {
      await followTurn({
        open,
        signal: own.signal,
        onEvent: (event) => {
          turn.value = applyEvent(turn.value, event);
          connection.value = "streaming";
        },
        onExecutionId: (id) => (turn.value = withExecutionId(turn.value, id)),
        onJson: (body) => (turn.value = fromExecution(turn.value, body)),
        onReconnecting: () => (connection.value = "reconnecting"),
      });
      connection.value = "closed";
    } catch (e) {
      if (own.signal.aborted) return turn.value;
      error.value = e.message;
      fieldErrors.value = e.fieldErrors ?? {};
      connection.value = "lost";
    }
    return turn.value;
  }

  /** Ask the server to cancel the running turn; its stream's `end` says when it ended. */
  async function cancel() {
    const id = turn.value.executionId;
    if (!id) return;
    cancelling.value = true;
    cancelError.value = "";
    try {
      await api.post(`/api/executions/${encodeURIComponent(id)}/cancel`);
    } catch (e) {
      // 409 "finished": it ended meanwhile; its end event is on the way.
      if (e.body?.code !== "finished") {
        cancelError.value = `Not cancelled: ${e.message}`;
        cancelling.value = false;
      }
    }
  }

  onBeforeUnmount(() => controller?.abort());

  return { turn, connection, error, fieldErrors, running, cancelling, cancelError, follow, cancel };
}
