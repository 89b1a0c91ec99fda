/* Input for Lull's Windows input backends to see under Wine, with no display: one
 * relative mouse move of (0, 0) through SendInput, which Wine's server passes to the
 * low-level mouse hooks and counts as the session's last input (GetLastInputInfo's tick
 * moves) although no window gets it. Only for scripts/check-platforms.sh; prints the
 * last-input tick before and after, and when it sent the event on the performance
 * counter in nanoseconds (`sent_ns N`, counter x 10^9 / frequency, as the agent's
 * input timings in `lull status --json`), and exits 1 unless SendInput took the event
 * and the tick moved. */
#include <windows.h>
#include <stdio.h>

static DWORD last_input_tick(void) {
    LASTINPUTINFO info = { sizeof(info), 0 };
    return GetLastInputInfo(&info) ? info.dwTime : 0;
}

/* The performance counter in nanoseconds, as agent-core/src/sys/windows/time.rs reads it. */
static unsigned long long counter_ns(void) {
    LARGE_INTEGER counter, frequency;
    QueryPerformanceCounter(&counter);
    QueryPerformanceFrequency(&frequency);
    return (unsigned long long)((unsigned __int128)counter.QuadPart * 1000000000u / (unsigned __int128)frequency.QuadPart);
}

int main(void) {
    DWORD before = last_input_tick();
    Sleep(20);
    INPUT move = { 0 };
    move.type = INPUT_MOUSE;
    move.mi.dwFlags = MOUSEEVENTF_MOVE;
    unsigned long long sent_ns = counter_ns();
    UINT sent = SendInput(1, &move, sizeof(move));
    DWORD after = last_input_tick();
    printf("SendInput: %u event(s) sent; last-input tick %lu -> %lu (tick now %lu); sent_ns %llu\n", sent, before, after,
           GetTickCount(), sent_ns);
    return sent == 1 && after != before ? 0 : 1;
}
