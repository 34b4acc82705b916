// Thin header for CMicroHTTPD. Typed static inline wrappers live here only where Swift cannot call
// the C API directly: MHD_start_daemon, MHD_get_daemon_info and MHD_get_connection_info are
// variadic. Each wrapper pins down the one argument list TokenRelay uses, so the types are checked
// by the C compiler instead of being smuggled through a va_list. They could go if the server moved
// to libmicrohttpd2 (non-variadic API) or to MHD_start_daemon_va with withVaList.
#ifndef CMICROHTTPD_SHIM_H
#define CMICROHTTPD_SHIM_H

#include <sys/socket.h>
#include <microhttpd.h>

/// The MHD_OPTION_UNESCAPE_CALLBACK function type (libmicrohttpd documents it, but names no type).
typedef size_t (*cmhd_unescape_callback)(void *cls, struct MHD_Connection *connection, char *text);

/// The MHD_OPTION_URI_LOG_CALLBACK function type: the request target as received, before
/// libmicrohttpd splits and decodes it; what it returns becomes the request's `req_cls`.
typedef void *(*cmhd_uri_log_callback)(void *cls, const char *uri, struct MHD_Connection *connection);

/// MHD_start_daemon bound to `address`, with a thread pool, connection limit, idle timeout
/// (seconds), per-connection memory (bytes), a request-completed callback, a connection
/// started/closed callback, the percent-decoder of paths and query arguments and
/// the request-target reader (`uri_log`) and MHD_OPTION_STRICT_FOR_CLIENT (`strict_for_client`: 0 lenient, 1 strict). Returns NULL on
/// failure (errno may say why).
static inline struct MHD_Daemon *cmhd_start_daemon(unsigned int flags,
                                                   const struct sockaddr *address,
                                                   unsigned int thread_pool_size,
                                                   unsigned int connection_limit,
                                                   unsigned int connection_timeout_seconds,
                                                   size_t connection_memory_limit,
                                                   MHD_AccessHandlerCallback access_handler,
                                                   void *access_handler_context,
                                                   MHD_RequestCompletedCallback completed,
                                                   void *completed_context,
                                                   MHD_NotifyConnectionCallback connection_notify,
                                                   void *connection_notify_context,
                                                   cmhd_unescape_callback unescape,
                                                   cmhd_uri_log_callback uri_log,
                                                   void *uri_log_context,
                                                   int strict_for_client) {
    return MHD_start_daemon(flags, 0, NULL, NULL, access_handler, access_handler_context,
                            MHD_OPTION_SOCK_ADDR, address,
                            MHD_OPTION_THREAD_POOL_SIZE, thread_pool_size,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
                            MHD_OPTION_NOTIFY_CONNECTION, connection_notify, connection_notify_context,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, uri_log_context,
                            MHD_OPTION_STRICT_FOR_CLIENT, strict_for_client,
                            MHD_OPTION_END);
}

/// The port the daemon's listening socket is bound to, or 0 if unknown.
static inline unsigned short cmhd_daemon_bind_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/// The peer's socket address, or NULL if unknown.
static inline const struct sockaddr *cmhd_connection_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/// The connection's socket, or -1 if unknown (to shut down a connection whose request head is late).
static inline int cmhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/// Bytes of the request head (request line, header lines and the empty line) as received, or 0
/// if unknown; valid from the first access-handler call on.
static inline size_t cmhd_connection_header_size(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? 0 : info->header_size;
}

/// The per-connection pointer set in the MHD_CONNECTION_NOTIFY_STARTED callback, or NULL.
static inline void *cmhd_connection_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

#endif
