/*
 * ctl_msg.c — fuzz target for the control messages a peer can send
 * (lf_wire_decode). Input: the message bytes. A decoded message must
 * re-encode to the same bytes. The client's parser of a shared-memory slot
 * has its own target, slot_header.c. Seeds: tests/tools/ctl_seeds.c writes
 * one message of every type (e2e/fuzz_seeds keeps them current).
 */
#include "lf_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lf_msg m;
    if (lf_wire_decode(data, size, &m) != 0) return 0;
    /* A decoded WELCOME's step counts are its received bytes (steps_le);
     * the encoder takes them as numbers, as the server gives them. */
    static uint32_t steps[LF_WIRE_EPOCHS_MAX];
    if (m.type == LF_MSG_WELCOME) {
        lf_wire_steps(&m.u.welcome, steps);
        m.u.welcome.steps = steps;
    }
    static unsigned char again[LF_WIRE_MAX];
    int n = lf_wire_encode(&m, again, sizeof again);
    if (n < 0 || (size_t)n != size || memcmp(again, data, size) != 0) abort();
    return 0;
}
