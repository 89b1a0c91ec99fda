/* Input for Lull's Windows input backend to see under Wine, with no display: one
 * relative mouse move of (0, 0) through SendInput, which Wine's server counts as the
 * session's last input (GetLastInputInfo's tick moves) although no window gets it. Only
 * for scripts/check-platforms.sh; prints the last-input tick before and after and exits
 * 1 unless SendInput took the event and the tick moved. */
#include <windows.h>
#include <stdio.h>

static DWORD last_input_tick(void) {
    LASTINPUTINFO info = { sizeof(info), 0 };
    return GetLastInputInfo(&info) ? info.dwTime : 0;
}

int main(void) {
    DWORD before = last_input_tick();
    Sleep(20);
    INPUT move = { 0 };
    move.type = INPUT_MOUSE;
    move.mi.dwFlags = MOUSEEVENTF_MOVE;
    UINT sent = SendInput(1, &move, sizeof(move));
    DWORD after = last_input_tick();
    printf("SendInput: %u event(s) sent; last-input tick %lu -> %lu (tick now %lu)\n", sent, before, after, GetTickCount());
    return sent == 1 && after != before ? 0 : 1;
}
