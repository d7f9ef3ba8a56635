/*
 * startup.c — lf-server's endpoint while it plans.
 *
 * The server takes its endpoint before anything slow (main.c): a second
 * server on the same endpoint is refused at once, before it opens the
 * dataset, and a client started before the server, or while it plans a
 * large index (most of a minute at 10 M samples), is answered at once.
 * Until the control thread (control.c) takes the sockets over, this thread
 * answers on them: a HELLO gets PLANNING with the share of the start-up
 * plan walked so far (the client asks again a moment later and keeps
 * waiting: its connect timeout counts silence, not planning), a STATS_REQ
 * gets {"state": "planning", ...} (lf-stat; lf-launch's probe), anything
 * else an ERROR. A SIGINT or SIGTERM stops the planning (the prepass looks
 * at startup_stop after each step) and the server exits, removing its
 * sockets. The thread is joined before the control thread starts: the
 * ZeroMQ socket passes from one thread to the other, never shared.
 */
#include "srv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <zmq.h>

#define STARTUP_POLL_MS 50       /* how soon srv_startup_end is noticed */

static void answer(srv_startup *u, const srv_request *q)
{
    srv *s = u->s;
    const unsigned char *id = q->id;
    if (u->signal) {
        srv_endpoint_send_error(u->ep, id, q->idlen, -ECANCELED,
                                "the server was stopped by a signal while it planned");
        return;
    }
    if (q->msg.type == LF_MSG_HELLO) {
        lf_msg m = {.type = LF_MSG_PLANNING, .u.planning_pct = srv_startup_pct(s)};
        srv_endpoint_send(u->ep, id, q->idlen, &m);
    } else if (q->msg.type == LF_MSG_STATS_REQ) {
        char *text = srv_stats_planning_json(s, u->start_ns);
        lf_msg m = {.type = LF_MSG_STATS,
                    .u.text = {.len = text ? (uint32_t)strlen(text) : 0, .text = text}};
        if (text) srv_endpoint_send(u->ep, id, q->idlen, &m);
        else srv_endpoint_send_error(u->ep, id, q->idlen, -ENOMEM, "stats: out of memory");
        free(text);
    } else if (q->msg.type != LF_MSG_HEARTBEAT && q->msg.type != LF_MSG_BYE) {
        srv_endpoint_send_error(u->ep, id, q->idlen, -EPROTO,
                                "the server is still planning: send HELLO first");
    }
}

static void *startup_main(void *arg)
{
    srv_startup *u = arg;
    static srv_request q; /* large; this thread's alone while it runs */
    while (!atomic_load(&u->done)) {
        zmq_pollitem_t it[2] = {{.socket = u->ep->router, .events = ZMQ_POLLIN},
                                {.fd = u->ep->sigfd, .events = ZMQ_POLLIN}};
        if (zmq_poll(it, 2, STARTUP_POLL_MS) < 0) continue;
        struct signalfd_siginfo si;
        if (it[1].revents && read(u->ep->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
            u->signal = (int)si.ssi_signo;
            atomic_store(&u->s->startup_stop, 1);
        }
        while (srv_endpoint_recv(u->ep, &q) == 1) answer(u, &q);
    }
    return NULL;
}

int srv_startup_begin(srv *s, srv_endpoint *ep, srv_startup *u)
{
    *u = (srv_startup){.s = s, .ep = ep, .start_ns = srv_now_ns()};
    int rc = pthread_create(&u->thread, NULL, startup_main, u);
    if (rc != 0) return -rc;
    u->running = 1;
    return 0;
}

int srv_startup_end(srv_startup *u)
{
    if (!u->running) return 0;
    atomic_store(&u->done, 1);
    pthread_join(u->thread, NULL);
    u->running = 0;
    return u->signal;
}
