/* bench/run's second ceiling: libmicrohttpd alone, set up as token-relay's HTTP server is
 * (HTTPServerBridge: internal polling thread + epoll, turbo, suspend/resume allowed, a pool of two
 * threads, 24 KiB per connection), answering every request with the same bytes. What token-relay
 * measures below this is the cost of our own code; what this measures below nginx is the server
 * library's.
 *
 *   mhd-ceiling PORT STATUS CONTENT-TYPE BODY-FILE [NAME:VALUE]...
 *
 * Like the bridge, it reads the whole request body before it answers, copies the answer into a
 * new response per request (MHD_RESPMEM_MUST_COPY) and adds its headers one by one. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned int status;
static const char *content_type;
static char *body;
static size_t body_size;
static char **extra_headers;
static int extra_count;

static enum MHD_Result answer(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size, void **request) {
    (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
    static int started;
    if (*request == NULL) { *request = &started; return MHD_YES; }  /* answering on the first call closes the connection */
    if (*upload_data_size != 0) { *upload_data_size = 0; return MHD_YES; }
    struct MHD_Response *response = MHD_create_response_from_buffer(body_size, body, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", content_type);
    for (int i = 0; i < extra_count; i++) {
        char *colon = strchr(extra_headers[i], ':');
        if (colon == NULL) continue;
        *colon = '\0';
        MHD_add_response_header(response, extra_headers[i], colon + 1);
        *colon = ':';
    }
    enum MHD_Result queued = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return queued;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: %s PORT STATUS CONTENT-TYPE BODY-FILE [NAME:VALUE]...\n", argv[0]); return 2; }
    status = (unsigned int)atoi(argv[2]);
    content_type = argv[3];
    FILE *file = fopen(argv[4], "rb");
    if (file == NULL) { perror(argv[4]); return 1; }
    body = malloc(1 << 20);
    body_size = fread(body, 1, 1 << 20, file);
    fclose(file);
    extra_headers = argv + 5;
    extra_count = argc - 5;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO | MHD_USE_ITC;
    struct MHD_Daemon *daemon = MHD_start_daemon(flags, (uint16_t)atoi(argv[1]), NULL, NULL, answer, NULL,
                                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
                                                 MHD_OPTION_THREAD_POOL_SIZE, 2u,
                                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)24576,
                                                 MHD_OPTION_CONNECTION_TIMEOUT, 60u,
                                                 MHD_OPTION_END);
    if (daemon == NULL) { fprintf(stderr, "mhd-ceiling: MHD_start_daemon failed\n"); return 1; }
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigprocmask(SIG_BLOCK, &signals, NULL);
    int received;
    sigwait(&signals, &received);
    MHD_stop_daemon(daemon);
    return 0;
}
